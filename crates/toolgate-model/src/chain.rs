//! The text of an error with its sources.

/// An error and its sources joined with `: `, each text said once (a source
/// whose text the message already holds is left out), e.g. `error sending
/// request: connection refused`. Providers, the engine and the server report
/// failures with it.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(text: &'static str, source: Option<Layer>) -> Layer {
        Layer { text, source: source.map(Box::new) }
    }

    #[test]
    fn sources_are_joined_once_each() {
        let inner = layer("connection refused", None);
        let middle = layer("error sending request: connection refused", Some(inner));
        let outer = layer("cannot reach the provider", Some(middle));
        assert_eq!(error_chain(&outer), "cannot reach the provider: error sending request: connection refused");
        assert_eq!(error_chain(&layer("alone", None)), "alone");
    }
}

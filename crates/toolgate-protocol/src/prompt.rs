//! [`Prompt`]: the messages of one model call, shared rather than copied.
//!
//! The engine keeps one prompt for a whole call and hands every step's
//! [`ModelRequest`](crate::ModelRequest) a reference-counted handle to it, so
//! no step copies the conversation. A prompt is immutable through a handle;
//! whoever holds the only handle can take its messages back
//! ([`Prompt::into_vec`]) without a copy.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ModelMessage;

/// The messages a model receives, shared. Derefs to `[ModelMessage]` and
/// serializes as the JSON array of them.
#[derive(Clone, Default, PartialEq)]
pub struct Prompt(Arc<Vec<ModelMessage>>);

impl Prompt {
    /// The messages, copied only when another handle still shares them.
    pub fn into_vec(self) -> Vec<ModelMessage> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| shared.as_ref().clone())
    }
}

impl Deref for Prompt {
    type Target = [ModelMessage];

    fn deref(&self) -> &[ModelMessage] {
        &self.0
    }
}

impl From<Vec<ModelMessage>> for Prompt {
    fn from(messages: Vec<ModelMessage>) -> Self {
        Self(Arc::new(messages))
    }
}

impl From<Arc<Vec<ModelMessage>>> for Prompt {
    fn from(messages: Arc<Vec<ModelMessage>>) -> Self {
        Self(messages)
    }
}

impl PartialEq<Vec<ModelMessage>> for Prompt {
    fn eq(&self, other: &Vec<ModelMessage>) -> bool {
        self.0.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for Prompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl Serialize for Prompt {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Prompt {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<ModelMessage>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_reads_and_writes_as_its_messages_and_gives_them_back_without_a_copy() {
        let messages = vec![ModelMessage::system("be brief"), ModelMessage::user("hi")];
        let prompt = Prompt::from(messages.clone());
        assert_eq!(serde_json::to_value(&prompt).unwrap(), serde_json::to_value(&messages).unwrap());
        let read: Prompt = serde_json::from_value(serde_json::to_value(&messages).unwrap()).unwrap();
        assert_eq!(read, messages);
        assert_eq!(format!("{prompt:?}"), format!("{messages:?}"));

        let buffer = prompt.as_ptr();
        let shared = prompt.clone();
        assert_eq!(shared.as_ptr(), buffer, "a handle shares the messages");
        let copied = shared.into_vec();
        assert_ne!(copied.as_ptr(), buffer, "another handle holds them: a copy");
        let taken = prompt.into_vec();
        assert_eq!(taken.as_ptr(), buffer, "the only handle: the same vector");
        assert_eq!(copied, taken);
    }
}

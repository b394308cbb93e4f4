//! The `slack` format: a Slack incoming-webhook message with Block Kit blocks.
//!
//! The message has a fallback `text` (notifications, clients without blocks)
//! and these blocks: a header with the headline; a section with the tool (and
//! a sub-agent's call's lineage, `researcher › accountant › tool`), the
//! requester, the reason and the conversation; a section with the input as
//! pretty JSON in a code block, cut to stay within Block Kit's 3,000-character
//! text limit with a note saying so; a section with who decides (approvers,
//! quorum), the votes so far, and the state (decided, expired, executed
//! events) or the expiry (the others); then, when the event has links, an
//! `actions` block with Approve (primary), Deny (danger) and View URL buttons
//! for events that ask for a decision, or a View link otherwise; and a
//! context line with the event and approval ids. Text taken from the event is
//! escaped for mrkdwn (`&`, `<`, `>`), and a run of three backticks in the
//! input is broken up so it cannot end the code block.

use serde_json::{Value, json};

use crate::event::{Event, Links};
use crate::summary::Summary;

/// The longest text of a section or context element.
pub const SLACK_TEXT_LIMIT: usize = 3000;
/// The longest header text.
pub const SLACK_HEADER_LIMIT: usize = 150;
/// The longest button URL.
pub const SLACK_URL_LIMIT: usize = 3000;

/// Renders an event as a Slack message (`{"text", "blocks"}`).
pub fn render_slack(event: &Event) -> Value {
    let summary = Summary::of(event);
    let title = summary.title(event.kind);
    let mut blocks = vec![
        json!({"type": "header", "text": plain_text(&truncate_plain(&title, SLACK_HEADER_LIMIT))}),
        section(&facts(&summary)),
        section(&input_text(&summary.input)),
        section(&decision_text(&summary, event)),
    ];
    if let Some(links) = &event.links {
        if event.kind.asks_for_decision() {
            blocks.extend(actions(links));
        } else if links.view.len() <= SLACK_URL_LIMIT {
            blocks.push(context(&format!("<{}|View in toolgate>", escape_url(&links.view))));
        }
    }
    let mut ids = format!("Event `{}` ({})", escape(&event.id), event.kind);
    if !summary.approval_id.is_empty() {
        ids.push_str(&format!(" · approval `{}`", escape(&summary.approval_id)));
    }
    ids.push_str(&format!(" · {}", escape(&event.created_at)));
    blocks.push(context(&ids));
    let mut fallback = title;
    if let Some(requester) = &summary.requester {
        fallback.push_str(&format!(" (requested by {requester})"));
    }
    json!({"text": truncate_mrkdwn(&escape(&fallback), SLACK_TEXT_LIMIT), "blocks": blocks})
}

fn facts(summary: &Summary) -> String {
    let mut lines = vec![format!("*Tool:* `{}`", escape(&summary.tool))];
    if let Some(lineage) = &summary.lineage {
        lines.push(format!("*Lineage:* {}", escape(lineage)));
    }
    if let Some(requester) = &summary.requester {
        lines.push(format!("*Requested by:* {}", escape(requester)));
    }
    if let Some(reason) = &summary.reason {
        lines.push(format!("*Reason:* {}", escape(reason)));
    }
    if let Some(conversation) = &summary.conversation_id {
        lines.push(format!("*Conversation:* `{}`", escape(conversation)));
    }
    lines.join("\n")
}

fn decision_text(summary: &Summary, event: &Event) -> String {
    let mut lines = vec![format!("*Who decides:* {}", escape(&summary.deciders()))];
    if summary.votes.is_empty() {
        lines.push("*Votes:* none yet".to_owned());
    } else {
        lines.push("*Votes:*".to_owned());
        lines.extend(summary.votes.iter().map(|vote| format!("• {}", escape(&vote.line()))));
    }
    if Summary::shows_state(event.kind) {
        if let Some(state) = &summary.state {
            lines.push(format!("*State:* {}", escape(state)));
        }
    } else if let Some(expires) = &summary.expires_at {
        lines.push(format!("*Expires:* {}", escape(expires)));
    }
    lines.join("\n")
}

/// The input with a zero-width space before every backtick that follows
/// another: no run of backticks, however long, is left to end the code
/// block early (a run of three would, and a five-run split into three and
/// two would still leave one).
fn break_backtick_runs(input: &str) -> String {
    let mut broken = String::with_capacity(input.len());
    let mut previous = None;
    for c in input.chars() {
        if c == '`' && previous == Some('`') {
            broken.push('\u{200B}');
        }
        broken.push(c);
        previous = Some(c);
    }
    broken
}

/// The input as a code block that fits one section, with a note when cut.
fn input_text(input: &str) -> String {
    const HEAD: &str = "*Input:*\n```\n";
    const TAIL: &str = "\n```";
    let input = break_backtick_runs(input);
    let total = input.chars().count();
    let full = escape(&input);
    if HEAD.len() + full.chars().count() + TAIL.len() <= SLACK_TEXT_LIMIT {
        return format!("{HEAD}{full}{TAIL}");
    }
    let note_room = "\n_Input cut: the first 0000000000 of 0000000000 characters are shown._".len();
    let budget = SLACK_TEXT_LIMIT - HEAD.len() - TAIL.len() - note_room;
    let (shown, shown_chars) = escape_prefix(&input, budget);
    format!("{HEAD}{shown}{TAIL}\n_Input cut: the first {shown_chars} of {total} characters are shown._")
}

fn actions(links: &Links) -> Option<Value> {
    let buttons: Vec<Value> = [
        ("approve", "Approve", Some("primary"), &links.approve),
        ("deny", "Deny", Some("danger"), &links.deny),
        ("view", "View", None, &links.view),
    ]
    .into_iter()
    .filter(|(_, _, _, url)| url.len() <= SLACK_URL_LIMIT)
    .map(|(action_id, label, style, url)| {
        let mut button = json!({"type": "button", "action_id": action_id, "text": plain_text(label), "url": url});
        if let Some(style) = style {
            button["style"] = json!(style);
        }
        button
    })
    .collect();
    (!buttons.is_empty()).then(|| json!({"type": "actions", "block_id": "toolgate_actions", "elements": buttons}))
}

fn plain_text(text: &str) -> Value {
    json!({"type": "plain_text", "text": text, "emoji": true})
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate_mrkdwn(text, SLACK_TEXT_LIMIT)}})
}

fn context(text: &str) -> Value {
    json!({"type": "context", "elements": [{"type": "mrkdwn", "text": truncate_mrkdwn(text, SLACK_TEXT_LIMIT)}]})
}

/// Escapes the three characters mrkdwn gives a meaning.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A URL inside `<url|label>`: escaped, and `|` percent-encoded.
fn escape_url(url: &str) -> String {
    escape(url).replace('|', "%7C")
}

/// The escaped form of the longest prefix of `raw` whose escape fits in
/// `budget` characters, and how many characters of `raw` that is.
fn escape_prefix(raw: &str, budget: usize) -> (String, usize) {
    let mut out = String::new();
    let mut used = 0;
    let mut taken = 0;
    for c in raw.chars() {
        let piece = escape(c.encode_utf8(&mut [0; 4]));
        let width = piece.chars().count();
        if used + width > budget {
            break;
        }
        out.push_str(&piece);
        used += width;
        taken += 1;
    }
    (out, taken)
}

/// Cuts already-escaped mrkdwn to `limit` characters, ending in `…`, never
/// inside an `&…;` entity.
fn truncate_mrkdwn(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(limit - 1).collect();
    if let Some(amp) = cut.rfind('&')
        && !cut[amp..].contains(';')
    {
        cut.truncate(amp);
    }
    cut.push('…');
    cut
}

/// Cuts plain text to `limit` characters, ending in `…`.
fn truncate_plain(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(limit - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_handles_the_three_characters() {
        assert_eq!(escape("a & <b> c"), "a &amp; &lt;b&gt; c");
    }

    #[test]
    fn truncation_never_splits_an_entity() {
        let text = format!("{}&amp;tail", "x".repeat(8));
        let cut = truncate_mrkdwn(&text, 11);
        assert_eq!(cut, "xxxxxxxx…");
        assert_eq!(truncate_mrkdwn("short", 10), "short");
        assert_eq!(truncate_plain(&"é".repeat(200), 150).chars().count(), 150);
    }

    #[test]
    fn long_input_is_cut_with_a_note() {
        let input = "<".repeat(5000);
        let text = input_text(&input);
        assert!(text.chars().count() <= SLACK_TEXT_LIMIT);
        assert!(text.contains("_Input cut: the first "), "{text}");
        assert!(text.ends_with("of 5000 characters are shown._"));
        assert!(!text.contains('<'));
    }

    #[test]
    fn backtick_runs_cannot_close_the_code_block() {
        let text = input_text("\"a```b\"");
        assert_eq!(text.matches("```").count(), 2, "{text}");
        // Five backticks used to leave a run of three after the replacement.
        let text = input_text("\"`````<https://evil.example|click>\"");
        assert_eq!(text.matches("```").count(), 2, "{text}");
    }

    proptest::proptest! {
        /// Any input, cut or not, leaves exactly the block's own two fences.
        #[test]
        fn no_input_closes_the_code_block(input in "[`a<>&\n]{0,64}", repeat in 1usize..200) {
            let text = input_text(&input.repeat(repeat));
            proptest::prop_assert_eq!(text.matches("``").count(), 2, "{}", text);
            proptest::prop_assert!(text.starts_with("*Input:*\n```\n"));
        }
    }
}

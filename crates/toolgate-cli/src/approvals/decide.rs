//! `toolgate approvals watch --decide`: a terminal approver.
//!
//! The watch's source (the store's poll, or the server's stream) runs on
//! while one approval at a time is asked about; arrivals queue meanwhile, in
//! arrival order ([`Desk`]). Each pending approval the acting principal may
//! decide and has not voted on is asked about once per watch: its [`card`],
//! then the keys of `toolgate chat` ([`keys`]) and `s` to skip. The vote
//! goes through the inbox, as `approve`/`deny` do; a refusal is printed as
//! `error: CODE: MESSAGE` and the watch goes on. A queued approval that
//! stops pending before it is asked is dropped with a note.

use std::collections::{HashSet, VecDeque};
use std::fmt;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::answers::{Answers, Reply, SKIP, Say};
use super::render::{Output, Printer, card, outcome};
use super::{Ballot, Inbox, Refusal};

/// Why an edited input is refused (the approval is asked again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditRefusal {
    /// The text is not JSON.
    NotJson(String),
    /// The JSON is not an object (what it is instead).
    NotAnObject(&'static str),
}

impl fmt::Display for EditRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotJson(error) => write!(f, "not valid JSON ({error})"),
            Self::NotAnObject(kind) => write!(f, "a tool input is a JSON object, not {kind}"),
        }
    }
}

impl std::error::Error for EditRefusal {}

/// The edited input in `text`: a JSON object.
pub fn parse_edit(text: &str) -> Result<Value, EditRefusal> {
    let value: Value = serde_json::from_str(text).map_err(|error| EditRefusal::NotJson(error.to_string()))?;
    match value {
        Value::Object(_) => Ok(value),
        Value::Array(_) => Err(EditRefusal::NotAnObject("an array")),
        Value::String(_) => Err(EditRefusal::NotAnObject("a string")),
        Value::Number(_) => Err(EditRefusal::NotAnObject("a number")),
        Value::Bool(_) => Err(EditRefusal::NotAnObject("a boolean")),
        Value::Null => Err(EditRefusal::NotAnObject("null")),
    }
}

/// The prompt and its keys, as `toolgate chat` words them: `e` only where
/// an edit may count (one approver decides: the lifecycle refuses an edit
/// among several), `a` only where the person may keep a sticky decision,
/// and `s` to skip.
pub fn keys(tool: &str, editable: bool, always: bool) -> (String, Vec<char>) {
    let mut prompt = String::from("  [y] approve once  [n] deny  ");
    let mut choices = vec!['y', 'n'];
    if editable {
        prompt.push_str("[e] edit  ");
        choices.push('e');
    }
    if always {
        prompt.push_str(&format!("[a] always allow {tool} in this chat  "));
        choices.push('a');
    }
    prompt.push_str("[s] skip › ");
    choices.push(SKIP);
    (prompt, choices)
}

/// Watches `inbox` and asks about each approval as it arrives, until the
/// answers end (exit 0) or the source fails.
pub async fn watch(inbox: &Inbox, output: Output) -> anyhow::Result<()> {
    let say = Say::new(output == Output::Jsonl);
    let me = inbox.principal().await?;
    let answers = Answers::open(say)?;
    let mut desk =
        Desk { inbox, printer: Printer::new(output), say, answers, me, queue: VecDeque::new(), asked: HashSet::new() };
    let (arrived, mut arrivals) = mpsc::unbounded_channel();
    let mut each = move |item: &Value| {
        let _ = arrived.send(item.clone());
        Ok(())
    };
    tokio::select! {
        watched = inbox.watch(&mut each) => watched,
        decided = desk.run(&mut arrivals) => decided,
    }
}

/// One person deciding, one approval at a time.
struct Desk<'a> {
    inbox: &'a Inbox,
    printer: Printer,
    say: Say,
    answers: Answers,
    /// Who the person is (on a server: who it takes them for).
    me: Option<String>,
    /// Approvals to ask about, in arrival order, each as last heard of.
    queue: VecDeque<Value>,
    /// The ids asked about already (each is asked once).
    asked: HashSet<String>,
}

/// What the desk waits for when nothing is queued.
enum Idle {
    /// An item from the source (`None`: the source is gone).
    Arrived(Option<Value>),
    /// Stdin ended with no answer left.
    AnswersEnded,
}

impl Desk<'_> {
    /// Asks about what arrives until the answers end. What arrives together
    /// (a source's first listing, newest first) queues oldest first.
    async fn run(&mut self, arrivals: &mut mpsc::UnboundedReceiver<Value>) -> anyhow::Result<()> {
        loop {
            let mut batch: Vec<Value> = std::iter::from_fn(|| arrivals.try_recv().ok()).collect();
            if batch.is_empty() && self.queue.is_empty() {
                let idle = tokio::select! {
                    item = arrivals.recv() => Idle::Arrived(item),
                    () = self.answers.ended() => Idle::AnswersEnded,
                };
                match idle {
                    Idle::Arrived(Some(item)) => batch.push(item),
                    Idle::Arrived(None) | Idle::AnswersEnded => return Ok(()),
                }
                batch.extend(std::iter::from_fn(|| arrivals.try_recv().ok()));
            }
            // RFC 3339 times in UTC, to the millisecond: in order as text.
            batch.sort_by(|a, b| text(&a["createdAt"]).cmp(&text(&b["createdAt"])));
            for item in batch {
                self.arrive(item);
            }
            if let Some(item) = self.queue.pop_front()
                && !self.ask(item).await?
            {
                return Ok(());
            }
        }
    }

    /// Queues a pending approval to ask about, updates a queued one, drops
    /// a queued one that stopped pending; ignores what was asked already.
    fn arrive(&mut self, item: Value) {
        let id = text(&item["id"]);
        if self.asked.contains(&id) {
            return;
        }
        let queued = self.queue.iter().position(|queued| queued["id"] == item["id"]);
        match (queued, item["state"] == "pending") {
            (Some(at), false) => {
                self.queue.remove(at);
                let (tool, state) = (text(&item["tool"]), text(&item["state"]));
                self.say.line(&format!("{id} ({tool}) is {state} now: not asked"));
            }
            (None, false) => {}
            (Some(at), true) => self.queue[at] = item,
            (None, true) if self.voted(&item) => {}
            (None, true) => self.queue.push_back(item),
        }
    }

    /// Who acts on `item`: the person, or for an approval of a server
    /// without principals (no requester, no approvers) its one user, who has no name.
    fn acting(&self, item: &Value) -> Option<String> {
        let unowned = item["requester"].is_null() && item["approvers"].as_array().is_none_or(Vec::is_empty);
        if unowned { None } else { self.me.clone() }
    }

    /// Whether the person voted on `item` already.
    fn voted(&self, item: &Value) -> bool {
        let me = json!(self.acting(item));
        item["votes"].as_array().is_some_and(|votes| votes.iter().any(|vote| vote["principal"] == me))
    }

    /// Whether the person may keep "always allow" in `item`'s conversation: they own it, or nobody does.
    fn may_always_allow(&self, item: &Value) -> bool {
        match item["requester"].as_str() {
            None => true,
            Some(owner) => self.acting(item).as_deref() == Some(owner),
        }
    }

    /// Shows `item` and asks until answered; false when the answers ended.
    async fn ask(&mut self, item: Value) -> anyhow::Result<bool> {
        self.asked.insert(text(&item["id"]));
        if self.printer.is_jsonl() {
            self.printer.line(&item)?;
        }
        self.say.raw(&card(&item));
        let editable = item["quorum"].as_u64().is_none_or(|quorum| quorum <= 1);
        let (prompt, choices) = keys(&text(&item["tool"]), editable, self.may_always_allow(&item));
        loop {
            let Some(key) = self.answers.key(&prompt, &choices).await? else { return Ok(false) };
            let ballot = match key {
                'y' | 'a' => Ballot { approve: true, reason: None, edited_input: None, grant: None },
                'n' => match self.answers.line("  reason (Enter to skip): ").await? {
                    Reply::Text(text) => {
                        Ballot { approve: false, reason: non_empty(&text), edited_input: None, grant: None }
                    }
                    Reply::Ended => Ballot { approve: false, reason: None, edited_input: None, grant: None },
                    Reply::Cancelled | Reply::Failed(_) => continue,
                },
                'e' => match self.edit(&item).await? {
                    Some(input) => Ballot { approve: true, reason: None, edited_input: Some(input), grant: None },
                    None => continue,
                },
                _ => {
                    self.say.line(&format!("  skipped: {} stays pending", text(&item["id"])));
                    return Ok(true);
                }
            };
            self.vote(&item, ballot, key == 'a').await?;
            return Ok(true);
        }
    }

    /// The person's edit of `item`'s input; `None` (said why) when there is none to vote with.
    async fn edit(&mut self, item: &Value) -> anyhow::Result<Option<Value>> {
        let problem = match self.answers.edit(&item["input"]).await? {
            Reply::Text(text) if text.trim().is_empty() => "edit cancelled".to_owned(),
            Reply::Text(text) => match parse_edit(&text) {
                Ok(input) if input == item["input"] => "the input is unchanged".to_owned(),
                Ok(input) => return Ok(Some(input)),
                Err(refusal) => format!("✗ edit refused: {refusal}"),
            },
            Reply::Cancelled | Reply::Ended => "edit cancelled".to_owned(),
            Reply::Failed(problem) => format!("{problem}; edit cancelled"),
        };
        self.say.line(&format!("  {problem}"));
        Ok(None)
    }

    /// Casts `ballot` on `item` and says how it went; with `always`, then
    /// keeps "always allow". A refusal is printed; other failures end the watch.
    async fn vote(&mut self, item: &Value, ballot: Ballot, always: bool) -> anyhow::Result<()> {
        let vote = match (&ballot.approve, &ballot.edited_input) {
            (false, _) => "denial",
            (true, None) => "approval",
            (true, Some(_)) => "approval of the edited input",
        };
        let after = match self.inbox.vote(&text(&item["id"]), ballot).await {
            Ok(after) => after,
            Err(error) => return refused(error),
        };
        if self.printer.is_jsonl() {
            self.printer.line(&after)?;
        }
        self.say.line(&outcome(vote, &after));
        if always {
            let (tool, conversation) = (text(&item["tool"]), text(&item["conversationId"]));
            match self.inbox.always_allow(item).await {
                Ok(id) => self.say.line(&format!(
                    "  later {tool} calls in chat {conversation} need no approval, unless a rule asks (sticky decision {id})"
                )),
                Err(error) => match error.downcast::<Refusal>() {
                    Ok(refusal) => eprintln!("error: {refusal}"),
                    Err(error) => eprintln!("error: the vote counts, but no sticky decision is kept: {error:#}"),
                },
            }
        }
        Ok(())
    }
}

/// A refusal printed as `error: CODE: MESSAGE` (the watch goes on); any other error.
fn refused(error: anyhow::Error) -> anyhow::Result<()> {
    let refusal = error.downcast::<Refusal>()?;
    eprintln!("error: {refusal}");
    Ok(())
}

/// `text` trimmed, unless that leaves nothing.
fn non_empty(text: &str) -> Option<String> {
    Some(text.trim().to_owned()).filter(|text| !text.is_empty())
}

/// A string field, or the JSON written.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_must_be_a_json_object() {
        assert_eq!(parse_edit(r#" {"amount": 5} "#), Ok(json!({"amount": 5})));
        assert!(matches!(parse_edit("{amount: 5}"), Err(EditRefusal::NotJson(_))));
        assert_eq!(parse_edit("[1]"), Err(EditRefusal::NotAnObject("an array")));
        assert_eq!(parse_edit("[1]").unwrap_err().to_string(), "a tool input is a JSON object, not an array");
    }

    #[test]
    fn edit_and_always_are_offered_only_where_they_may_count() {
        let (prompt, choices) = keys("pay", true, true);
        assert_eq!(prompt, "  [y] approve once  [n] deny  [e] edit  [a] always allow pay in this chat  [s] skip › ");
        assert_eq!(choices, ['y', 'n', 'e', 'a', 's']);
        let (prompt, choices) = keys("pay", false, false);
        assert_eq!(prompt, "  [y] approve once  [n] deny  [s] skip › ");
        assert_eq!(choices, ['y', 'n', 's']);
    }
}

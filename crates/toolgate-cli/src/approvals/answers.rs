//! The person deciding in `toolgate approvals watch --decide`: their answers,
//! read on a thread of their own, so the watch keeps taking arrivals (they
//! queue) while a prompt is open, and Ctrl-C or a failing source is not held
//! up by a blocked read.
//!
//! - stdin a terminal: one key press an answer, as `toolgate chat` asks
//!   (crossterm's raw mode; Enter is `s`; Ctrl-C, Ctrl-D or Esc end the
//!   watch), a line editor (rustyline) for a reason, and for an edit
//!   `$VISUAL`/`$EDITOR` when set (the pretty JSON in a temporary file), else
//!   one line pre-filled with the compact JSON, as chat's edit.
//! - otherwise (a pipe, a file): one line an answer: a key (`y`, `n`, ...;
//!   an empty line is `s`), then a reason or the edited JSON on a line of its
//!   own. The end of input ends the watch, at a prompt or as soon as no
//!   approval waits to be asked and no answer is left.
//!
//! Prompts and their notes go to the prompt stream ([`Say`]): stdout, or
//! stderr with `--output jsonl` (whose stdout is for items).

use std::io::{self, BufRead, IsTerminal, Write};
use std::time::Duration;

use crossterm::event;
use rustyline::DefaultEditor;
use rustyline::config::{Behavior, Config};
use rustyline::error::ReadlineError;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::chat::terminal::{self, RawKey, RawMode, chosen_editor, read_key};

/// The key that skips, and what an empty line or Enter answers.
pub const SKIP: char = 's';

/// Where prompts and notes for the person go.
#[derive(Debug, Clone, Copy)]
pub struct Say {
    to_stderr: bool,
}

impl Say {
    /// Prompts to stderr (`true`) or stdout.
    pub fn new(to_stderr: bool) -> Self {
        Self { to_stderr }
    }

    /// Writes `text` and a new line.
    pub fn line(&self, text: &str) {
        self.raw(&format!("{text}\n"));
    }

    /// Writes `text` as is (a prompt) and flushes it.
    pub fn raw(&self, text: &str) {
        let mut out: Box<dyn Write> =
            if self.to_stderr { Box::new(io::stderr().lock()) } else { Box::new(io::stdout().lock()) };
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

/// What asking for a line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The line (without its new line), or the edited file's text.
    Text(String),
    /// Ctrl-C at a line prompt: ask the approval again.
    Cancelled,
    /// The end of input (Ctrl-D on an empty line at a terminal).
    Ended,
    /// The editor failed: why.
    Failed(String),
}

/// Why a line is not an answer to the key prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAKey(pub String);

/// The answer a line gives at the key prompt: one of `choices` (any case,
/// spaces around ignored), or [`SKIP`] for an empty line.
pub fn parse_key(line: &str, choices: &[char]) -> Result<char, NotAKey> {
    let text = line.trim().to_lowercase();
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (None, _) if choices.contains(&SKIP) => Ok(SKIP),
        (Some(key), None) if choices.contains(&key) => Ok(key),
        _ => Err(NotAKey(line.trim().to_owned())),
    }
}

/// `y, n, e or s`: the keys of a prompt, for a note.
pub fn hint(choices: &[char]) -> String {
    let keys: Vec<String> = choices.iter().map(char::to_string).collect();
    match keys.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The person's answers, and where prompts for them go.
pub struct Answers {
    say: Say,
    source: Source,
}

/// Where answers come from.
enum Source {
    /// Lines of a stdin that is not a terminal, read ahead.
    Lines(Lines),
    /// The terminal, asked by its thread.
    Terminal(Requests),
}

impl Answers {
    /// The answers of stdin: at a terminal, or line by line.
    pub fn open(say: Say) -> io::Result<Self> {
        let source = if io::stdin().is_terminal() { terminal(say)? } else { Source::Lines(Lines::spawn()?) };
        Ok(Self { say, source })
    }

    /// Asks with `prompt` until the answer is one of `choices`; `None` ends the watch.
    pub async fn key(&mut self, prompt: &str, choices: &[char]) -> io::Result<Option<char>> {
        let lines = match &mut self.source {
            Source::Lines(lines) => lines,
            Source::Terminal(requests) => {
                let request = Request::Key { prompt: prompt.to_owned(), choices: choices.to_vec() };
                return Ok(match ask(requests, request).await? {
                    Reply::Text(text) => text.chars().next(),
                    _ => None,
                });
            }
        };
        loop {
            self.say.raw(prompt);
            let Some(line) = lines.next().await else {
                self.say.line("");
                return Ok(None);
            };
            self.say.line(line.trim());
            match parse_key(&line, choices) {
                Ok(key) => return Ok(Some(key)),
                Err(NotAKey(shown)) => {
                    self.say.line(&format!("  (`{shown}` is not an answer: press {})", hint(choices)))
                }
            }
        }
    }

    /// A line after `prompt` (a reason).
    pub async fn line(&mut self, prompt: &str) -> io::Result<Reply> {
        self.read(prompt, "").await
    }

    /// The person's edit of `input`: its text, as [`Answers`] says how.
    pub async fn edit(&mut self, input: &Value) -> io::Result<Reply> {
        match (&self.source, chosen_editor()) {
            (Source::Terminal(requests), Some(command)) => {
                let text = format!("{}\n", serde_json::to_string_pretty(input).map_err(io::Error::other)?);
                ask(requests, Request::Editor { command, text }).await
            }
            _ => self.read("  edit> ", &input.to_string()).await,
        }
    }

    /// Resolves once stdin has ended with no answer left to read (never at a terminal).
    pub async fn ended(&mut self) {
        match &mut self.source {
            Source::Lines(lines) => lines.ended().await,
            Source::Terminal(_) => std::future::pending().await,
        }
    }

    /// A line after `prompt`, pre-filled with `initial` at a terminal.
    async fn read(&mut self, prompt: &str, initial: &str) -> io::Result<Reply> {
        let lines = match &mut self.source {
            Source::Lines(lines) => lines,
            Source::Terminal(requests) => {
                return ask(requests, Request::Line { prompt: prompt.to_owned(), initial: initial.to_owned() }).await;
            }
        };
        self.say.raw(prompt);
        Ok(match lines.next().await {
            Some(line) => {
                self.say.line(&line);
                Reply::Text(line)
            }
            None => {
                self.say.line("");
                Reply::Ended
            }
        })
    }
}

/// What the terminal's thread is sent: a request, and where its answer goes.
type Requests = mpsc::UnboundedSender<(Request, oneshot::Sender<io::Result<Reply>>)>;

/// Has the terminal's thread do `request`.
async fn ask(requests: &Requests, request: Request) -> io::Result<Reply> {
    let (reply, answer) = oneshot::channel();
    requests.send((request, reply)).map_err(|_| io::Error::other("the terminal's thread is gone"))?;
    answer.await.map_err(|_| io::Error::other("the terminal's thread is gone"))?
}

impl Drop for Answers {
    /// Leaves raw mode however the watch ends (a prompt may be open).
    fn drop(&mut self) {
        if matches!(self.source, Source::Terminal(_)) {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
}

/// The lines of stdin, read ahead on a thread.
struct Lines {
    receiver: mpsc::UnboundedReceiver<String>,
    /// The next line (`Some(None)`: the end), when looked at before it was asked for.
    peeked: Option<Option<String>>,
}

impl Lines {
    fn spawn() -> io::Result<Self> {
        let (sender, receiver) = mpsc::unbounded_channel();
        std::thread::Builder::new().name("toolgate-answers".into()).spawn(move || {
            for line in io::stdin().lock().lines() {
                // A read error ends the input like its end.
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        })?;
        Ok(Self { receiver, peeked: None })
    }

    /// The next line; `None` at the end.
    async fn next(&mut self) -> Option<String> {
        match self.peeked.take() {
            Some(line) => line,
            None => self.receiver.recv().await,
        }
    }

    /// Resolves when the next line is the end (cancel-safe: a line read is kept).
    async fn ended(&mut self) {
        loop {
            match &self.peeked {
                Some(None) => return,
                Some(Some(_)) => std::future::pending::<()>().await,
                None => self.peeked = Some(self.receiver.recv().await),
            }
        }
    }
}

/// What the terminal's thread is asked to do.
enum Request {
    /// One key press of `choices` (Enter is [`SKIP`]).
    Key { prompt: String, choices: Vec<char> },
    /// A line, pre-filled.
    Line { prompt: String, initial: String },
    /// `text` edited in the editor `command`.
    Editor { command: String, text: String },
}

/// Starts the terminal's thread.
fn terminal(say: Say) -> io::Result<Source> {
    let (sender, mut requests) = mpsc::unbounded_channel::<(Request, oneshot::Sender<io::Result<Reply>>)>();
    std::thread::Builder::new().name("toolgate-terminal".into()).spawn(move || {
        let mut editor: Option<DefaultEditor> = None;
        while let Some((request, reply)) = requests.blocking_recv() {
            let answer = match request {
                Request::Key { prompt, choices } => key(say, &prompt, &choices),
                Request::Line { prompt, initial } => read_line(&mut editor, &prompt, &initial),
                Request::Editor { command, text } => run_editor(&command, &text),
            };
            let _ = reply.send(answer);
        }
    })?;
    Ok(Source::Terminal(sender))
}

/// One key press of `choices` (any case; Enter is [`SKIP`]); another key
/// says which apply and asks again; Ctrl-C, Ctrl-D and Esc end. Keys typed
/// ahead, before the prompt showed, are dropped.
fn key(say: Say, prompt: &str, choices: &[char]) -> io::Result<Reply> {
    // Raw mode before the prompt shows, so a key pressed at once is neither echoed nor held for a line;
    // keys typed before it showed are dropped: they answer no approval the person has seen.
    let raw = RawMode::enable()?;
    while event::poll(Duration::ZERO)? {
        event::read()?;
    }
    say.raw(prompt);
    let answer = loop {
        let shown = match read_key()? {
            RawKey::Char(c) if choices.contains(&c.to_ascii_lowercase()) => break Some(c.to_ascii_lowercase()),
            RawKey::Enter if choices.contains(&SKIP) => break Some(SKIP),
            RawKey::Cancel => break None,
            RawKey::Char(c) => format!("`{c}`"),
            RawKey::Enter | RawKey::Other => "that key".to_owned(),
        };
        // Raw mode: a new line needs its carriage return.
        say.raw(&format!("\r\n  ({shown} is not an answer: press {})\r\n{prompt}", hint(choices)));
    };
    drop(raw);
    Ok(match answer {
        Some(key) => {
            say.line(&key.to_string());
            Reply::Text(key.to_string())
        }
        None => {
            say.line("^C");
            Reply::Ended
        }
    })
}

/// A line from the line editor (made when first needed).
fn read_line(editor: &mut Option<DefaultEditor>, prompt: &str, initial: &str) -> io::Result<Reply> {
    let editor = match editor {
        Some(editor) => editor,
        None => {
            let config = Config::builder().behavior(Behavior::PreferTerm).auto_add_history(false).build();
            editor.insert(DefaultEditor::with_config(config).map_err(io::Error::other)?)
        }
    };
    match editor.readline_with_initial(prompt, (initial, "")) {
        Ok(text) => Ok(Reply::Text(text)),
        Err(ReadlineError::Interrupted) => Ok(Reply::Cancelled),
        Err(ReadlineError::Eof) => Ok(Reply::Ended),
        Err(ReadlineError::Io(error)) => Err(error),
        Err(other) => Err(io::Error::other(other)),
    }
}

/// Opens `text` in `editor` as chat's edit does.
fn run_editor(editor: &str, text: &str) -> io::Result<Reply> {
    Ok(match terminal::run_editor(editor, text)? {
        Ok(text) => Reply::Text(text),
        Err(failed) => Reply::Failed(failed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_answers_with_one_key_and_an_empty_line_skips() {
        let choices = ['y', 'n', 'e', 's'];
        assert_eq!(parse_key(" Y \n", &choices), Ok('y'));
        assert_eq!(parse_key("", &choices), Ok(SKIP));
        assert_eq!(parse_key("a", &choices), Err(NotAKey("a".into())));
        assert_eq!(parse_key("yes", &choices), Err(NotAKey("yes".into())));
        assert_eq!(hint(&choices), "y, n, e or s");
    }
}

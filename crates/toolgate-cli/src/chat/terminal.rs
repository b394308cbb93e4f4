//! The person at the terminal: input lines with editing and history
//! (`rustyline`), single key presses for the approval prompt (`crossterm`'s
//! raw mode), and `$VISUAL`/`$EDITOR` for editing a tool input.
//!
//! Everything here blocks; the session calls it from `block_in_place`.

use std::io::{self, Write};
use std::process::Command;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::{Color, Stylize};
use rustyline::DefaultEditor;
use rustyline::config::{Behavior, Config};
use rustyline::error::ReadlineError;

/// What reading a line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line (without its newline).
    Text(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D on an empty line, or the end of input.
    Eof,
}

/// What a key press at a single-key prompt gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// One of the keys offered (lower case).
    Choice(char),
    /// Ctrl-C or Esc.
    Cancel,
}

/// The terminal.
pub struct Terminal {
    /// For chat messages (with their own history).
    messages: DefaultEditor,
    /// For reasons, edits and answers (history of its own: the person's earlier attempts).
    answers: DefaultEditor,
    color: bool,
    /// Prompts go to stderr (with `--output jsonl`, whose stdout is for events).
    prompts_to_stderr: bool,
}

impl Terminal {
    /// Opens the terminal.
    pub fn new(color: bool, prompts_to_stderr: bool) -> anyhow::Result<Self> {
        let config = || {
            Config::builder()
                .behavior(Behavior::PreferTerm)
                .auto_add_history(false)
                .max_history_size(1000)
                .map(|b| b.build())
        };
        let messages = DefaultEditor::with_config(config()?)?;
        let answers = DefaultEditor::with_config(config()?)?;
        Ok(Self { messages, answers, color, prompts_to_stderr })
    }

    /// Paints `text` when colors are on.
    pub fn paint(&self, text: &str, color: Color) -> String {
        if self.color { text.with(color).to_string() } else { text.to_owned() }
    }

    /// Writes a line for the person.
    pub fn say(&self, text: &str) {
        let mut out: Box<dyn Write> =
            if self.prompts_to_stderr { Box::new(io::stderr().lock()) } else { Box::new(io::stdout().lock()) };
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// Reads the next chat message (`you> `).
    pub fn read_message(&mut self) -> io::Result<Line> {
        let prompt = self.paint("you> ", Color::Cyan);
        let line = read(&mut self.messages, &prompt, "")?;
        if let Line::Text(text) = &line
            && !text.trim().is_empty()
        {
            let _ = self.messages.add_history_entry(text.as_str());
        }
        Ok(line)
    }

    /// Reads an answer line, pre-filled with `initial` (the cursor after it).
    pub fn read_answer(&mut self, prompt: &str, initial: &str) -> io::Result<Line> {
        let line = read(&mut self.answers, prompt, initial)?;
        if let Line::Text(text) = &line
            && !text.trim().is_empty()
        {
            let _ = self.answers.add_history_entry(text.as_str());
        }
        Ok(line)
    }

    /// Asks with one key press (no Enter): shows `prompt`, waits for one of
    /// `choices` (any case); any other key says which keys apply and asks
    /// again. Ctrl-C, Ctrl-D and Esc cancel.
    pub fn key(&mut self, prompt: &str, choices: &[char]) -> io::Result<Key> {
        let mut out: Box<dyn Write> =
            if self.prompts_to_stderr { Box::new(io::stderr().lock()) } else { Box::new(io::stdout().lock()) };
        let keys: Vec<String> = choices.iter().map(char::to_string).collect();
        let hint = match keys.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        // Raw mode before the prompt shows, so a key pressed as soon as it
        // appears is neither echoed nor held for a line.
        let raw = RawMode::enable()?;
        write!(out, "{prompt}")?;
        out.flush()?;
        let answer = loop {
            let key = read_key()?;
            match key {
                RawKey::Char(c) if choices.contains(&c.to_ascii_lowercase()) => {
                    break Key::Choice(c.to_ascii_lowercase());
                }
                RawKey::Cancel => break Key::Cancel,
                RawKey::Char(_) | RawKey::Enter | RawKey::Other => {
                    let shown = match key {
                        RawKey::Char(c) => format!("`{c}`"),
                        _ => "that key".to_owned(),
                    };
                    // Raw mode: a new line needs its carriage return.
                    let note = self.paint(&format!("  ({shown} is not an answer: press {hint})"), Color::DarkGrey);
                    write!(out, "\r\n{note}\r\n{prompt}")?;
                    out.flush()?;
                }
            }
        };
        drop(raw);
        match answer {
            Key::Choice(c) => writeln!(out, "{c}")?,
            Key::Cancel => writeln!(out, "^C")?,
        }
        out.flush()?;
        Ok(answer)
    }
}

fn read(editor: &mut DefaultEditor, prompt: &str, initial: &str) -> io::Result<Line> {
    match editor.readline_with_initial(prompt, (initial, "")) {
        Ok(text) => Ok(Line::Text(text)),
        Err(ReadlineError::Interrupted) => Ok(Line::Interrupted),
        Err(ReadlineError::Eof) => Ok(Line::Eof),
        Err(ReadlineError::Io(error)) => Err(error),
        Err(other) => Err(io::Error::other(other)),
    }
}

/// A key press at a key prompt.
pub(crate) enum RawKey {
    /// A character key.
    Char(char),
    /// Enter.
    Enter,
    /// Ctrl-C, Ctrl-D or Esc.
    Cancel,
    /// Another key (an arrow...).
    Other,
}

/// Raw mode while alive: left when dropped, however the prompt ends.
pub(crate) struct RawMode;

impl RawMode {
    /// Enters raw mode.
    pub(crate) fn enable() -> io::Result<Self> {
        crossterm::terminal::enable_raw_mode()?;
        Ok(Self)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// One key press (the terminal is in raw mode: no echo, no Enter needed).
pub(crate) fn read_key() -> io::Result<RawKey> {
    loop {
        let Event::Key(KeyEvent { code, modifiers, kind, .. }) = event::read()? else { continue };
        if kind != KeyEventKind::Press {
            continue;
        }
        let control = modifiers.contains(KeyModifiers::CONTROL);
        return Ok(match code {
            KeyCode::Char('c' | 'd') if control => RawKey::Cancel,
            KeyCode::Esc => RawKey::Cancel,
            KeyCode::Enter => RawKey::Enter,
            KeyCode::Char(c) if !control => RawKey::Char(c),
            _ => RawKey::Other,
        });
    }
}

/// The editor the person chose: `$VISUAL`, else `$EDITOR` (set and not empty).
pub fn chosen_editor() -> Option<String> {
    ["VISUAL", "EDITOR"].into_iter().filter_map(|name| std::env::var(name).ok()).find(|value| !value.trim().is_empty())
}

/// Opens `text` in `editor` (a shell command: `vim`, `code -w`, ...) in a
/// temporary `.json` file and reads it back; `None` when the editor failed.
pub fn run_editor(editor: &str, text: &str) -> io::Result<Result<String, String>> {
    let mut file = tempfile::Builder::new().prefix("toolgate-edit-").suffix(".json").tempfile()?;
    file.write_all(text.as_bytes())?;
    file.flush()?;
    let status = Command::new("sh").arg("-c").arg(format!("{editor} \"$1\"")).arg("sh").arg(file.path()).status()?;
    if !status.success() {
        return Ok(Err(format!("the editor (`{editor}`) exited with {status}")));
    }
    // Read by path: editors often write a new file and rename it over the old one.
    Ok(Ok(std::fs::read_to_string(file.path())?))
}

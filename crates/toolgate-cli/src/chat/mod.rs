//! `toolgate chat`: a terminal chat with approvals, on `toolgate-client`.
//!
//! The model runs in this process (`InProcessTransport`, the ledger in the
//! store when there is one, bound to the chat id) or behind `--server`
//! (`HttpTransport`). Text streams as it arrives; every approval request of a
//! response is asked after the response ends, one after the other; the chat
//! sends the answers once the last is given and its continuation streams the
//! same way.
//!
//! Who answers: the person (single keys y/n/e/a), or for scripts
//! `--approve-all`, `--deny-all`, `--decisions FILE`. Without a terminal on
//! stdin and without one of those, an approval request is an error.

mod decisions;
mod render;
mod sticky;
pub(crate) mod terminal;

use std::collections::BTreeSet;
use std::future::Future;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use toolgate_server::receipts::Sealer;

use anyhow::{Context, anyhow, bail};
use clap::{Args, ValueEnum};
use crossterm::style::Color;
use futures::{FutureExt, Stream, StreamExt};
use serde_json::Value;
use toolgate::approval::lifecycle::{self, EditCheck};
use toolgate::ledger::{Clock, LedgerStore, MemoryStore, SystemClock};
use toolgate::tool::{CallGate, Caller};
use toolgate::{ApprovalContext, TextRequest, Tool, Toolkit};
use toolgate_client::{
    Chat, ChatEvent, ClientError, Decision, HttpTransport, InProcessTransport, ToolOutput, ToolState,
};
use toolgate_policy::{PolicyHandle, StoredGate};
use toolgate_ui::UiRole;

use self::decisions::{Answer, Decisions};
use self::render::{Answerer, Pending, Renderer, TextView, compact};
use self::sticky::StickySink;
use self::terminal::{Key, Line, Terminal};
use crate::config::ConfigArgs;
use crate::model_spec::model_or_default;
use crate::store::{LedgerArgs, StoreArgs};
use crate::tools::ToolSetup;
use crate::tools::Tools;

/// How `toolgate chat` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Text for people: streamed text, tool calls, outcomes.
    Text,
    /// Every chat event as one JSON object a line, plus `decision` lines.
    Jsonl,
}

/// Arguments of `toolgate chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The model, e.g. `local:PATH.gguf`, `openai:gpt-4o-mini` or `script:FILE` (default: the local model
    /// `toolgate model pull` installs), run in this process.
    #[arg(long, conflicts_with = "server")]
    model: Option<String>,
    /// Record tool inputs and outputs on the exported trace spans of the tools run in this process
    /// (traces are exported when an OTEL_* variable is set, as for `toolgate serve`).
    #[arg(long)]
    pub(crate) trace_content: bool,
    /// Chat with a running server instead: `http://HOST:PORT` (the chat endpoint `/api/chat` is added) or the
    /// endpoint's full URL. `TOOLGATE_TOKEN`, if set, is sent as a bearer token.
    #[arg(long)]
    server: Option<String>,
    /// The toolkit: offered to the model in this process; with `--server`, what is known locally about the
    /// server's tools (which may be edited, their schemas). MCP tools of `--config` join it.
    #[arg(long, value_enum, default_value_t = Tools::Demo)]
    tools: Tools,
    #[command(flatten)]
    config: ConfigArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    ledger: LedgerArgs,
    /// A system prompt.
    #[arg(long, conflicts_with = "server")]
    system: Option<String>,
    /// Approve every approval request without asking.
    #[arg(long, conflicts_with_all = ["deny_all", "decisions"])]
    approve_all: bool,
    /// Deny every approval request without asking.
    #[arg(long, conflicts_with = "decisions")]
    deny_all: bool,
    /// Answer approval requests from this file, in order: one JSON object a line, `{"decision":"approve"}`,
    /// `{"decision":"deny","reason":"..."}` or `{"decision":"edit","input":{...}}`, each with an optional
    /// `"tool":"NAME"` that must match the tool asking.
    #[arg(long, value_name = "FILE")]
    decisions: Option<PathBuf>,
    /// What to print.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Send this message (repeatable: sent in order, each after the previous exchange ends), then exit.
    /// Without it, messages are read at a prompt, or line by line when stdin is not a terminal.
    #[arg(short = 'm', long = "message", value_name = "TEXT")]
    messages: Vec<String>,
}

/// Who answers approval requests.
enum Approver {
    Person,
    ApproveAll,
    DenyAll,
    File(Decisions),
    /// Nobody: no terminal and no decision flag.
    Nobody,
}

/// Runs the chat. Exit status 1 when a request failed (with `-m` or stdin
/// lines); Ctrl-D at the prompt ends an interactive chat with 0.
pub async fn run(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let mut sealer = None;
    let result = converse(args, &mut sealer).await;
    // The receipts worker of an in-process engine's store: the last events sealed, a final checkpoint.
    if let Some(sealer) = sealer {
        sealer.finish().await;
    }
    result
}

/// Runs the chat; `sealer` receives the receipts worker of the store an
/// in-process engine writes to.
async fn converse(args: ChatArgs, sealer: &mut Option<Sealer>) -> anyhow::Result<ExitCode> {
    let stdin_is_terminal = std::io::stdin().is_terminal();
    let approver = if args.approve_all {
        Approver::ApproveAll
    } else if args.deny_all {
        Approver::DenyAll
    } else if let Some(path) = &args.decisions {
        Approver::File(Decisions::load(path)?)
    } else if stdin_is_terminal {
        Approver::Person
    } else {
        Approver::Nobody
    };
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    let color = !no_color && std::io::stdout().is_terminal() && args.output == Output::Text;
    let terminal = if stdin_is_terminal { Some(Terminal::new(color, args.output == Output::Jsonl)?) } else { None };
    let setup = ToolSetup::load(args.tools, args.config.config.as_deref()).await?;
    let toolkit = setup.toolkit()?;
    let chat_id = format!("chat-{}", uuid::Uuid::now_v7().simple());

    let (chat, description, sticky) = match &args.server {
        Some(url) => {
            let endpoint = chat_endpoint(url)?;
            let mut transport = HttpTransport::new(&endpoint);
            let token = std::env::var("TOOLGATE_TOKEN").ok().filter(|token| !token.is_empty());
            if let Some(token) = &token {
                transport = transport.bearer_token(token).context("TOOLGATE_TOKEN")?;
            }
            let sticky = StickySink::server(&endpoint, token)?;
            (Chat::new(chat_id.clone(), transport), format!("server {endpoint}"), sticky)
        }
        None => {
            let (transport, description, decisions, sealed) = in_process(&args, toolkit.clone(), &setup).await?;
            *sealer = sealed;
            (Chat::new(chat_id.clone(), transport), description, StickySink::Store(decisions))
        }
    };
    // In this process, an edited input must also pass the rules and sticky
    // decisions the engine gates calls with; a server checks its own.
    let edit_rules = match (&args.server, &sticky) {
        (None, StickySink::Store(decisions)) => {
            Some(EditRules { policy: setup.policy.clone(), decisions: Arc::clone(decisions) })
        }
        _ => None,
    };

    let interactive_prompt = terminal.is_some() && args.messages.is_empty();
    let view = match args.output {
        Output::Text => Renderer::Text(TextView::new(color, !interactive_prompt)),
        Output::Jsonl => Renderer::Jsonl,
    };
    let events = Box::pin(chat.subscribe());
    let mut session = Session {
        chat,
        events,
        view,
        approver,
        terminal,
        toolkit,
        edit_rules,
        catch_interrupts: stdin_is_terminal,
        sticky,
        always_allowed: BTreeSet::new(),
        pending: Vec::new(),
        exchange_errors: 0,
        failed: false,
    };

    if !args.messages.is_empty() {
        for message in args.messages {
            session.turn(message).await?;
            if session.failed {
                break;
            }
        }
        return Ok(if session.failed { ExitCode::FAILURE } else { ExitCode::SUCCESS });
    }
    if interactive_prompt {
        let tools = tools_name(args.tools);
        session.say(&session.paint(&format!("toolgate chat · {description} · tools {tools}"), Color::DarkGrey));
        let keys = "Enter sends · Ctrl-C stops a response · Ctrl-D quits";
        session.say(&session.paint(&format!("chat {chat_id} · {keys}"), Color::DarkGrey));
        loop {
            let line = {
                let terminal = session.terminal.as_mut().expect("a terminal");
                tokio::task::block_in_place(|| terminal.read_message())?
            };
            match line {
                Line::Text(text) if text.trim().is_empty() => {}
                Line::Text(text) => session.turn(text).await?,
                Line::Interrupted => {}
                Line::Eof => break,
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Messages from stdin, one a line.
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
    while let Some(line) = lines.next_line().await.context("cannot read stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        session.turn(line).await?;
        if session.failed {
            break;
        }
    }
    Ok(if session.failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn tools_name(tools: Tools) -> String {
    tools.to_possible_value().map(|value| value.get_name().to_owned()).unwrap_or_default()
}

/// The engine in this process: the model, the toolkit, a system prompt, a
/// signer with a key of this process, the ledger when there is a store, and
/// the config's rules with the chat's sticky decisions (kept in the store,
/// else in memory; returned for "always allow").
async fn in_process(
    args: &ChatArgs,
    toolkit: Option<Toolkit>,
    setup: &ToolSetup,
) -> anyhow::Result<(InProcessTransport, String, Arc<dyn LedgerStore>, Option<Sealer>)> {
    let model = model_or_default(args.model.as_deref())?;
    let store_text = args.store.store.clone().unwrap_or_else(|| "sqlite".into());
    let store_name = toolgate_store::StoreSpec::parse(&store_text, &args.store.data_dir())
        .map_or_else(|_| store_text.clone(), |spec| spec.to_string());
    let (store, sealer) = args.store.open_sealed().await?;
    let signer = InProcessTransport::random_signer()?;
    let decisions: Arc<dyn LedgerStore> = store.clone().unwrap_or_else(|| Arc::new(MemoryStore::new()));
    let ledger = store.map(|store| args.ledger.config(store));
    let system = args.system.clone();
    let policy = setup.policy.clone();
    let gate_decisions = Arc::clone(&decisions);
    let history = ledger.as_ref().map(|ledger| Arc::clone(&ledger.store));
    let groups = Arc::new(setup.groups());
    let description = format!("model {}/{} · store {store_name}", model.provider(), model.model_id());
    let transport = InProcessTransport::with_requests(model, move |chat_id, messages| {
        let now = SystemClock.now();
        let gate = StoredGate::new(policy.current(), Arc::clone(&gate_decisions), Some(chat_id.to_owned()), None, now);
        // History terms count the calls the store recorded (without one they are unknown).
        let gate = match &history {
            Some(store) => gate.with_history(Arc::clone(store), Arc::clone(&groups)),
            None => gate,
        };
        let mut request =
            TextRequest::new(messages).approval_signer(signer.clone()).gate(Arc::new(gate)).conversation_id(chat_id);
        if let Some(toolkit) = &toolkit {
            request = request.toolkit(toolkit.clone());
        }
        if let Some(system) = &system {
            request = request.system(system.clone());
        }
        if let Some(ledger) = &ledger {
            request = request.ledger(ledger.conversation(chat_id));
        }
        request
    });
    Ok((transport, description, decisions, sealer))
}

/// The chat endpoint of `--server`: `/api/chat` added to a URL without a path.
fn chat_endpoint(url: &str) -> anyhow::Result<String> {
    let invalid = || anyhow!("--server must be an http:// or https:// URL, got `{url}`");
    let mut parsed = reqwest::Url::parse(url.trim()).map_err(|_| invalid())?;
    if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
        return Err(invalid());
    }
    if parsed.path() == "/" {
        parsed.set_path("/api/chat");
    }
    Ok(parsed.to_string())
}

type EventStream = Pin<Box<dyn Stream<Item = ChatEvent> + Send>>;

/// The config's rules and the chat's sticky decisions, as the in-process
/// engine gates calls with them.
struct EditRules {
    policy: PolicyHandle,
    decisions: Arc<dyn LedgerStore>,
}

/// One chat session: the chat, its events, and who answers.
struct Session {
    chat: Chat,
    events: EventStream,
    view: Renderer,
    approver: Approver,
    terminal: Option<Terminal>,
    /// The tools known here (for editability and schemas); `None`: any tool, JSON syntax checks only.
    toolkit: Option<Toolkit>,
    /// What an edited input must pass besides its tool's policy (in this process only).
    edit_rules: Option<EditRules>,
    /// Ctrl-C stops a streaming response (a terminal is attached).
    catch_interrupts: bool,
    /// Where "always allow" (`a`) is kept.
    sticky: StickySink,
    /// Tools allowed for the rest of the session when no sticky decision could be kept.
    always_allowed: BTreeSet<String>,
    /// Approval requests of the responses since the last answers.
    pending: Vec<Pending>,
    /// Failures seen in the current exchange.
    exchange_errors: usize,
    /// Whether any request failed.
    failed: bool,
}

impl Session {
    fn say(&self, text: &str) {
        match &self.terminal {
            Some(terminal) => terminal.say(text),
            None => println!("{text}"),
        }
    }

    fn paint(&self, text: &str, color: Color) -> String {
        match &self.terminal {
            Some(terminal) => terminal.paint(text, color),
            None => text.to_owned(),
        }
    }

    fn tool(&self, name: &str) -> Option<&Tool> {
        self.toolkit.as_ref().and_then(|toolkit| toolkit.get(name))
    }

    /// Keeps "always allow `tool`" as a sticky decision of this chat; when
    /// that fails, for the rest of this session only. Returns what to tell the person.
    async fn always_allow(&mut self, tool: &str) -> String {
        match self.sticky.always_allow(&self.chat.id(), tool).await {
            Ok(id) => format!("later {tool} calls in this chat run without asking (sticky decision {id})"),
            Err(error) => {
                self.always_allowed.insert(tool.to_owned());
                format!(
                    "cannot keep a sticky decision ({error:#}); later {tool} calls in this session are approved here"
                )
            }
        }
    }

    /// Sends one user message, then answers what the responses ask until the chat rests.
    async fn turn(&mut self, text: String) -> anyhow::Result<()> {
        self.pending.clear();
        let chat = self.chat.clone();
        let mut stopped = self.exchange(async move { chat.send_message(text).await }).await?;
        loop {
            let pending = std::mem::take(&mut self.pending);
            if stopped {
                if !pending.is_empty() {
                    self.view.notice(&format!(
                        "{} approval request(s) left unanswered: they count as denied when you send the next message",
                        pending.len()
                    ))?;
                }
                return Ok(());
            }
            let client_calls = if self.exchange_errors == 0 { self.client_calls() } else { Vec::new() };
            if pending.is_empty() && client_calls.is_empty() {
                return Ok(());
            }
            self.view.end_line()?;
            let total = pending.len();
            for (index, request) in pending.iter().enumerate() {
                let Some((decision, by, note)) = self.decide(request, index, total).await? else {
                    self.view.notice(&format!(
                        "{} approval request(s) left unanswered: they count as denied when you send the next message",
                        total - index
                    ))?;
                    return Ok(());
                };
                self.view.decision(request, &decision, by, &note)?;
                let chat = self.chat.clone();
                let approval_id = request.approval_id.clone();
                stopped =
                    self.exchange(async move { chat.add_tool_approval_response(&approval_id, decision).await }).await?;
            }
            for (tool_call_id, tool_name, input) in client_calls {
                let Some(output) = self.client_output(&tool_name, &input)? else {
                    self.view.notice(&format!("{tool_name} ({tool_call_id}) left unanswered"))?;
                    return Ok(());
                };
                let chat = self.chat.clone();
                stopped = self.exchange(async move { chat.add_tool_output(&tool_call_id, output).await }).await?;
            }
        }
    }

    /// Runs `work` (a send or an answer, with any continuation it starts)
    /// while showing the chat's events; Ctrl-C stops the response. True when stopped.
    async fn exchange(&mut self, work: impl Future<Output = Result<(), ClientError>>) -> anyhow::Result<bool> {
        let mut work = std::pin::pin!(work);
        let catch = self.catch_interrupts;
        let mut interrupt = std::pin::pin!(async move {
            if catch {
                let _ = tokio::signal::ctrl_c().await;
            } else {
                std::future::pending::<()>().await;
            }
        });
        let mut stopped = false;
        self.exchange_errors = 0;
        let result = loop {
            tokio::select! {
                result = &mut work => break result,
                Some(event) = self.events.next() => self.on_event(event)?,
                () = &mut interrupt, if !stopped => {
                    stopped = true;
                    self.chat.stop();
                }
            }
        };
        // Every event of the work is queued by now.
        while let Some(Some(event)) = self.events.next().now_or_never() {
            self.on_event(event)?;
        }
        if let Err(error) = result {
            if self.exchange_errors == 0 {
                self.view.error(&error)?;
            }
            self.exchange_errors += 1;
        }
        if self.exchange_errors > 0 {
            self.failed = true;
        }
        if stopped {
            self.view.end_line()?;
            self.view.notice("(stopped)")?;
        }
        Ok(stopped)
    }

    fn on_event(&mut self, event: ChatEvent) -> anyhow::Result<()> {
        match &event {
            ChatEvent::ApprovalRequested { approval_id, tool_call_id, tool_name, input, reason, .. } => {
                self.pending.push(Pending {
                    approval_id: approval_id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    tool_name: tool_name.clone(),
                    input: input.clone(),
                    reason: reason.clone(),
                });
            }
            ChatEvent::Error { .. } => self.exchange_errors += 1,
            _ => {}
        }
        let chat = self.chat.clone();
        self.view.event(&event, || chat.messages()).context("cannot write the output")
    }

    /// Calls of the last response that wait for a result from this side (client-executed tools).
    fn client_calls(&self) -> Vec<(String, String, Value)> {
        let messages = self.chat.messages();
        let Some(last) = messages.last().filter(|message| message.role == UiRole::Assistant) else {
            return Vec::new();
        };
        last.tool_parts()
            .map(|(_, tool)| tool)
            .filter(|tool| {
                tool.state == ToolState::InputAvailable
                    && tool.approval.is_none()
                    && tool.provider_executed != Some(true)
                    && self.tool(&tool.tool_name).is_none_or(Tool::is_client_executed)
            })
            .map(|tool| (tool.tool_call_id.clone(), tool.tool_name.clone(), tool.input.clone().unwrap_or(Value::Null)))
            .collect()
    }

    /// The person's result for a client-executed call; `None` when they gave none.
    fn client_output(&mut self, tool_name: &str, input: &Value) -> anyhow::Result<Option<ToolOutput>> {
        let question = input.get("question").and_then(Value::as_str).map(str::to_owned);
        let Some(terminal) = self.terminal.as_mut() else {
            self.view.notice(&format!("{tool_name} needs an answer from a person; there is no terminal to ask"))?;
            return Ok(Some(ToolOutput::Error("nobody can answer: toolgate chat is not running in a terminal".into())));
        };
        let ask = match &question {
            Some(question) => format!("? {tool_name} asks: {question}"),
            None => format!("? {tool_name} {} waits for its result (JSON or text)", compact(input, 120)),
        };
        terminal.say(&terminal.paint(&ask, Color::Magenta));
        let line = tokio::task::block_in_place(|| terminal.read_answer("answer> ", ""))?;
        Ok(match line {
            Line::Text(text) if question.is_some() => Some(ToolOutput::Output(Value::String(text))),
            Line::Text(text) => Some(ToolOutput::Output(serde_json::from_str(&text).unwrap_or(Value::String(text)))),
            Line::Interrupted | Line::Eof => None,
        })
    }

    /// The answer to one approval request; `None` when the person left it unanswered (Ctrl-C).
    async fn decide(
        &mut self,
        request: &Pending,
        index: usize,
        total: usize,
    ) -> anyhow::Result<Option<(Decision, Answerer, String)>> {
        if self.always_allowed.contains(&request.tool_name) {
            return Ok(Some((Decision::Approve, Answerer::AlwaysAllowed, String::new())));
        }
        let entry = match &mut self.approver {
            Approver::Person => return self.ask(request, index, total).await,
            Approver::ApproveAll => return Ok(Some((Decision::Approve, Answerer::ApproveAll, String::new()))),
            Approver::DenyAll => return Ok(Some((Decision::Deny { reason: None }, Answerer::DenyAll, String::new()))),
            Approver::Nobody => bail!(
                "{} (call {}) asks for approval, but stdin is not a terminal to ask on: \
                 pass --approve-all, --deny-all or --decisions FILE",
                request.tool_name,
                request.tool_call_id
            ),
            Approver::File(decisions) => {
                let entry = decisions.next(request)?;
                (entry, decisions.name().to_owned())
            }
        };
        let (entry, file) = entry;
        let mut note = format!("--decisions line {}", entry.line);
        let decision = match entry.answer {
            Answer::Approve => Decision::Approve,
            Answer::Always => {
                note = format!("{note}; {}", self.always_allow(&request.tool_name).await);
                Decision::Approve
            }
            Answer::Deny(reason) => Decision::Deny { reason },
            Answer::Edit(input) => {
                if let Err(problem) = self.check_edit(request, &input).await {
                    bail!(
                        "--decisions {file}, line {}: the edited input for {} (call {}) is refused: {problem}",
                        entry.line,
                        request.tool_name,
                        request.tool_call_id
                    );
                }
                Decision::ApproveWithInput(input)
            }
        };
        Ok(Some((decision, Answerer::DecisionsFile, note)))
    }

    /// Whether `input` may replace the model's input, judged by the
    /// lifecycle's one edit check ([`lifecycle::check_edit`]): the tool takes
    /// edits, the input passes its schema, and neither its policy nor (in
    /// this process) the config's rules and the chat's sticky decisions deny
    /// it or route it to approvers other than the person at the terminal.
    /// Unknown tools take any JSON.
    async fn check_edit(&self, request: &Pending, input: &Value) -> Result<(), String> {
        let Some(tool) = self.tool(&request.tool_name) else { return Ok(()) };
        let history = toolgate_ui::convert_to_model_messages(&self.chat.messages()).unwrap_or_default();
        let context = ApprovalContext::new(request.tool_call_id.clone(), history);
        let chat_id = self.chat.id();
        let gate = self.edit_rules.as_ref().map(|rules| {
            let decisions = Arc::clone(&rules.decisions);
            StoredGate::new(rules.policy.current(), decisions, Some(chat_id.clone()), None, SystemClock.now())
        });
        let requester = Caller {
            gate: gate.as_ref().map(|gate| gate as &dyn CallGate),
            conversation_id: Some(&chat_id),
            principal: None,
            groups: &[],
        };
        let check = EditCheck { tool, edit: input, requester, context, routed: false, voter: None, input_schema: None };
        lifecycle::check_edit(check).await.map_err(|refusal| refusal.to_string())
    }

    /// Asks the person: y approve once, n deny (with an optional reason),
    /// e edit (editable tools), a always allow this tool.
    async fn ask(
        &mut self,
        request: &Pending,
        index: usize,
        total: usize,
    ) -> anyhow::Result<Option<(Decision, Answerer, String)>> {
        let editable = self.tool(&request.tool_name).is_none_or(Tool::is_editable);
        let name = request.tool_name.clone();
        let count = if total > 1 { format!(" ({} of {total})", index + 1) } else { String::new() };
        let header = format!("? approve {name} {}{count}", compact(&request.input, 160));
        let mut keys = String::from("[y] approve once  [n] deny  ");
        let mut choices = vec!['y', 'n'];
        if editable {
            keys.push_str("[e] edit  ");
            choices.push('e');
        }
        keys.push_str(&format!("[a] always allow {name} in this chat"));
        choices.push('a');
        loop {
            let terminal = self.terminal.as_mut().expect("a person answers at a terminal");
            terminal.say(&terminal.paint(&header, Color::Magenta));
            if let Some(reason) = &request.reason {
                terminal.say(&terminal.paint(&format!("  asked because: {reason}"), Color::DarkGrey));
            }
            let prompt = format!("  {keys} › ");
            let key = tokio::task::block_in_place(|| terminal.key(&prompt, &choices))?;
            match key {
                Key::Cancel => return Ok(None),
                Key::Choice('y') => return Ok(Some((Decision::Approve, Answerer::Person, String::new()))),
                Key::Choice('a') => {
                    let note = self.always_allow(&name).await;
                    self.say(&self.paint(&format!("  {note}"), Color::DarkGrey));
                    return Ok(Some((Decision::Approve, Answerer::Person, String::new())));
                }
                Key::Choice('n') => {
                    let line = tokio::task::block_in_place(|| terminal.read_answer("  reason (Enter to skip): ", ""))?;
                    match line {
                        Line::Text(text) => {
                            let reason = Some(text.trim().to_owned()).filter(|reason| !reason.is_empty());
                            return Ok(Some((Decision::Deny { reason }, Answerer::Person, String::new())));
                        }
                        Line::Eof => {
                            return Ok(Some((Decision::Deny { reason: None }, Answerer::Person, String::new())));
                        }
                        Line::Interrupted => continue,
                    }
                }
                Key::Choice(_) => {
                    if let Some(input) = self.edit(request).await? {
                        return Ok(Some((Decision::ApproveWithInput(input), Answerer::Person, String::new())));
                    }
                }
            }
        }
    }

    /// Lets the person edit the input until it is valid: in `$VISUAL`/`$EDITOR`
    /// when set (pretty JSON in a temp file), else on one line pre-filled with
    /// the compact JSON. `None` when they cancel or change nothing.
    async fn edit(&mut self, request: &Pending) -> anyhow::Result<Option<Value>> {
        let editor = terminal::chosen_editor();
        let mut draft = match editor {
            Some(_) => format!("{}\n", serde_json::to_string_pretty(&request.input)?),
            None => request.input.to_string(),
        };
        loop {
            let terminal = self.terminal.as_mut().expect("a person answers at a terminal");
            let text = match &editor {
                Some(command) => match tokio::task::block_in_place(|| terminal::run_editor(command, &draft))? {
                    Ok(text) => text,
                    Err(problem) => {
                        terminal.say(&terminal.paint(&format!("  {problem}; edit cancelled"), Color::Yellow));
                        return Ok(None);
                    }
                },
                None => match tokio::task::block_in_place(|| terminal.read_answer("  edit> ", &draft))? {
                    Line::Text(text) => text,
                    Line::Interrupted | Line::Eof => {
                        terminal.say(&terminal.paint("  edit cancelled", Color::DarkGrey));
                        return Ok(None);
                    }
                },
            };
            if text.trim().is_empty() {
                self.say(&self.paint("  edit cancelled", Color::DarkGrey));
                return Ok(None);
            }
            let problem = match serde_json::from_str::<Value>(&text) {
                Err(error) => format!("not valid JSON: {error}"),
                Ok(value) => match self.check_edit(request, &value).await {
                    Ok(()) if value == request.input => {
                        self.say(&self.paint("  the input is unchanged", Color::DarkGrey));
                        return Ok(None);
                    }
                    Ok(()) => return Ok(Some(value)),
                    Err(problem) => format!("{} refuses this input: {problem}", request.tool_name),
                },
            };
            self.say(&self.paint(&format!("  ✗ {problem}"), Color::Red));
            draft = text;
            let terminal = self.terminal.as_mut().expect("a person answers at a terminal");
            if editor.is_some() {
                let key = tokio::task::block_in_place(|| terminal.key("  [e] edit again  [c] cancel › ", &['e', 'c']))?;
                if key != Key::Choice('e') {
                    return Ok(None);
                }
            } else {
                terminal.say(&terminal.paint("  fix it, or an empty line / Ctrl-C cancels", Color::DarkGrey));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_without_a_path_get_the_chat_endpoint() {
        assert_eq!(chat_endpoint("http://127.0.0.1:3000").unwrap(), "http://127.0.0.1:3000/api/chat");
        assert_eq!(chat_endpoint("http://127.0.0.1:3000/").unwrap(), "http://127.0.0.1:3000/api/chat");
        assert_eq!(chat_endpoint("https://h.example/v2/chat").unwrap(), "https://h.example/v2/chat");
        assert!(chat_endpoint("127.0.0.1:3000").is_err());
        assert!(chat_endpoint("ftp://h/").is_err());
    }
}

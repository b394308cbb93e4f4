//! What the replica tests share: the server a child process runs, the guard
//! that owns a child, a small HTTP client, request bodies, stream parsing,
//! and the executions log that counts tool runs across processes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate::ledger::{ApprovalRecord, DEFAULT_SETTLE_WAIT, LedgerConfig, LedgerStore};
use toolgate::{ScriptedModel, Tool, ToolContext, ToolError, Toolkit};
use toolgate_server::{AppState, ApprovalSecret, ServerConfig, serve_listener};
use toolgate_store::{StoreSpec, open_store};

/// Set (to `1`) in a child process: the `replica_process` test serves instead of returning.
pub const SERVE_ENV: &str = "TOOLGATE_REPLICA_SERVE";
const STORE_ENV: &str = "TOOLGATE_REPLICA_STORE";
const LOG_ENV: &str = "TOOLGATE_REPLICA_EXECUTIONS";
const STARTS_ENV: &str = "TOOLGATE_REPLICA_STARTS";
const DELAY_ENV: &str = "TOOLGATE_REPLICA_DELAY_MS";
const LEASE_ENV: &str = "TOOLGATE_REPLICA_LEASE_MS";
const JITTER_ENV: &str = "TOOLGATE_REPLICA_JITTER";
/// Set (to `1`): `delete_file` is routed to `group:finance` (bob, carol, erin) with a quorum of
/// 2, principals come from the `x-user` header, and continuation claims last 2 s.
const ROUTED_ENV: &str = "TOOLGATE_REPLICA_ROUTED";
/// The rule of a routed replica.
const ROUTED_RULES: &str = "[[rule]]\nname = \"finance-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
                            approvers = [\"group:finance\"]\nquorum = 2\n";
/// The line a child prints once it listens.
const PORT_PREFIX: &str = "TOOLGATE_REPLICA_PORT=";
/// The approval secret every replica shares.
const SECRET: &str = "replicas-test-secret";
/// A child serves at most this long, whatever happens to its parent.
const MAX_LIFETIME: Duration = Duration::from_secs(600);
/// How long a child may take to print its port.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The tool call id of the scripted model's only call.
pub const CALL_ID: &str = "call-1";

// ---------------------------------------------------------------------------
// The child: a toolgate server on a SQL store.
// ---------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
struct PathInput {
    path: String,
}

/// Runs a toolgate server as the environment describes, until killed.
pub fn serve_from_env() {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let store = var(STORE_ENV);
    let log = PathBuf::from(var(LOG_ENV));
    let starts = PathBuf::from(var(STARTS_ENV));
    let delay = Duration::from_millis(var(DELAY_ENV).parse().expect("delay in ms"));
    let lease = Duration::from_millis(var(LEASE_ENV).parse().expect("lease in ms"));
    let delay = Delay { max: delay, jitter: var(JITTER_ENV) == "1" };
    // The parent holds our stdin: when it goes away, so do we.
    std::thread::spawn(|| {
        let mut sink = [0u8; 64];
        while matches!(std::io::stdin().read(&mut sink), Ok(read) if read > 0) {}
        std::process::exit(0);
    });
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    runtime.block_on(async move {
        let dir = std::env::temp_dir();
        let spec = StoreSpec::parse(&store, &dir).expect("a store spec");
        let store = open_store(&spec).await.expect("the store opens").expect("a SQL store");
        // Short-lease replicas (the kill tests) answer `approval_in_progress` at once, so a test can
        // observe the old lease; the others wait for another request's execution like a default server.
        let settle_wait = if lease < Duration::from_secs(10) { Duration::ZERO } else { DEFAULT_SETTLE_WAIT };
        let ledger = LedgerConfig::new(store).lease(lease).settle_wait(settle_wait);
        let secret = ApprovalSecret::resolve(Some(SECRET), &dir).expect("the secret");
        let toolkit = executions_toolkit(log, starts, delay);
        let mut config = ServerConfig::new("127.0.0.1:0".parse().expect("an address"), toolkit, secret);
        config.ledger = Some(ledger);
        if std::env::var(ROUTED_ENV).as_deref() == Ok("1") {
            route_to_finance(&mut config);
        }
        let model = ScriptedModel::from_json(&script().to_string()).expect("the script");
        let state = AppState::new(config, Arc::new(model)).expect("the state");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let port = listener.local_addr().expect("the bound address").port();
        println!("{PORT_PREFIX}{port}");
        std::io::stdout().flush().ok();
        // As `toolgate serve` serves: peer addresses for the principal header, the continuation worker.
        serve_listener(listener, state, tokio::time::sleep(MAX_LIFETIME)).await.expect("serving");
    });
}

/// A routed replica's settings (see [`ROUTED_ENV`]).
fn route_to_finance(config: &mut ServerConfig) {
    let policy = toolgate_policy::Policy::from_toml_str(ROUTED_RULES).expect("the rules");
    config.policy = toolgate_policy::PolicyHandle::new(policy);
    let header = axum::http::HeaderName::from_static("x-user");
    config.principals = toolgate_server::PrincipalSource::Header(header, Vec::new());
    let finance = ["bob", "carol", "erin"].map(str::to_owned).to_vec();
    config.groups = std::collections::BTreeMap::from([("finance".to_owned(), finance)]);
    config.continuation_lease = Duration::from_secs(2);
}

/// The scripted model: delete notes.txt, then say done.
fn script() -> Value {
    json!({"turns": [
        [{"type": "text", "text": "Deleting."},
         {"type": "tool-call", "toolCallId": CALL_ID, "toolName": "delete_file", "input": {"path": "notes.txt"}}],
        [{"type": "text", "text": "Done."}]
    ]})
}

/// How long the tool sleeps: `max`, or a random time up to `max` with jitter.
#[derive(Clone, Copy)]
struct Delay {
    max: Duration,
    jitter: bool,
}

impl Delay {
    fn pick(self) -> Duration {
        let max = u64::try_from(self.max.as_millis()).unwrap_or(u64::MAX);
        if !self.jitter || max == 0 {
            return self.max;
        }
        // The random tail of a v7 uuid.
        let random = uuid::Uuid::now_v7().as_u128() as u64;
        Duration::from_millis(random % (max + 1))
    }
}

/// A gated `delete_file` that notes its start, sleeps, then appends one
/// line per execution to the executions log and returns a fresh execution id.
fn executions_toolkit(log: PathBuf, starts: PathBuf, delay: Delay) -> Toolkit {
    let tool = Tool::function::<PathInput>("delete_file").needs_approval(true).handler(
        move |input: PathInput, context: ToolContext| {
            let (log, starts) = (log.clone(), starts.clone());
            async move {
                let key = key_of(&context);
                let call = context.tool_call_id().to_owned();
                append_line(&starts, &format!("{call} {} {key}\n", input.path))?;
                let delay = delay.pick();
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let execution = uuid::Uuid::now_v7().simple().to_string();
                append_line(&log, &format!("{call} {} {key} {execution}\n", input.path))?;
                Ok::<_, ToolError>(json!({"deleted": input.path, "key": key, "execution": execution}))
            }
        },
    );
    Toolkit::new([tool]).expect("a toolkit")
}

/// The chat's key, from the `[key=…]` tag of its user message (every call id is `call-1`).
fn key_of(context: &ToolContext) -> String {
    let text = serde_json::to_string(context.messages()).unwrap_or_default();
    text.split_once("[key=")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map_or_else(|| "unknown".to_owned(), |(key, _)| key.to_owned())
}

/// One `write_all` of a whole line to a file opened with `O_APPEND`: atomic across processes.
fn append_line(path: &Path, line: &str) -> Result<(), ToolError> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| ToolError::text(format!("cannot open {}: {error}", path.display())))?;
    file.write_all(line.as_bytes()).map_err(|error| ToolError::text(format!("cannot append: {error}")))
}

// ---------------------------------------------------------------------------
// The parent: a temp dir, the store, and replica processes.
// ---------------------------------------------------------------------------

/// A store, the logs the replicas write, and the temp dir holding them.
pub struct Fixture {
    pub dir: PathBuf,
    pub store_text: String,
    pub log: PathBuf,
    pub starts: PathBuf,
    pub store: Arc<dyn LedgerStore>,
}

impl Fixture {
    /// A fixture on this store (`None`: a fresh SQLite file in the temp dir).
    pub async fn new(label: &str, postgres_url: Option<String>) -> Self {
        let dir = std::env::temp_dir().join(format!("toolgate-replicas-{label}-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let store_text = match postgres_url {
            Some(url) => url,
            None => format!("sqlite:{}", dir.join("store.db").display()),
        };
        let spec = StoreSpec::parse(&store_text, &dir).expect("a store spec");
        let store = open_store(&spec).await.expect("the store opens").expect("a SQL store");
        Self { log: dir.join("executions.log"), starts: dir.join("starts.log"), dir, store_text, store }
    }

    /// Starts a replica whose tool sleeps `delay`, with this execution lease.
    pub fn spawn(&self, delay: Duration, lease: Duration) -> Replica {
        self.spawn_with(delay, false, lease)
    }

    /// Starts a replica whose tool sleeps `delay`, or up to `delay` at random with `jitter`.
    pub fn spawn_with(&self, delay: Duration, jitter: bool, lease: Duration) -> Replica {
        self.spawn_replica(delay, jitter, lease, false)
    }

    /// Starts a routed replica (see [`ROUTED_ENV`]) whose tool sleeps `delay`.
    pub fn spawn_routed(&self, delay: Duration, lease: Duration) -> Replica {
        self.spawn_replica(delay, false, lease, true)
    }

    fn spawn_replica(&self, delay: Duration, jitter: bool, lease: Duration, routed: bool) -> Replica {
        let exe = std::env::current_exe().expect("the test binary");
        let child = Command::new(exe)
            .args(["--exact", "replica_process", "--nocapture", "--test-threads=1"])
            .env(SERVE_ENV, "1")
            .env(STORE_ENV, &self.store_text)
            .env(LOG_ENV, &self.log)
            .env(STARTS_ENV, &self.starts)
            .env(DELAY_ENV, delay.as_millis().to_string())
            .env(LEASE_ENV, lease.as_millis().to_string())
            .env(JITTER_ENV, if jitter { "1" } else { "0" })
            .env(ROUTED_ENV, if routed { "1" } else { "0" })
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the replica starts");
        let mut replica = Replica { child, stdin: None, port: 0 };
        replica.stdin = replica.child.stdin.take();
        let stdout = replica.child.stdout.take().expect("piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sender = Some(sender);
            // Read to the end, so the child never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The harness may print `test replica_process ... ` before it on the same line.
                let port = line.split_once(PORT_PREFIX).and_then(|(_, port)| port.trim().parse::<u16>().ok());
                if let Some(port) = port
                    && let Some(sender) = sender.take()
                {
                    sender.send(port).ok();
                }
            }
        });
        // On a timeout the guard kills the child as it drops.
        replica.port = receiver.recv_timeout(START_TIMEOUT).expect("the replica prints its port");
        replica
    }

    /// The executions log so far.
    pub fn executions(&self) -> Executions {
        Executions::read(&self.log)
    }

    /// The keys whose tool call has started so far.
    pub fn started(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.starts).unwrap_or_default();
        text.lines().filter_map(|line| line.split(' ').nth(2).map(str::to_owned)).collect()
    }

    /// The records of these keys' approvals, by key.
    pub async fn records(&self, asked: &HashMap<String, Asked>) -> HashMap<String, ApprovalRecord> {
        let ids: Vec<String> = asked.values().map(|asked| asked.approval_id.clone()).collect();
        let keys: HashMap<&str, &str> =
            asked.iter().map(|(key, asked)| (asked.approval_id.as_str(), key.as_str())).collect();
        let mut records = HashMap::new();
        for chunk in ids.chunks(200) {
            for record in self.store.approvals(chunk).await.expect("the store answers") {
                let key = keys[record.approval_id.as_str()].to_owned();
                records.insert(key, record);
            }
        }
        records
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// A replica process, killed and reaped when dropped.
pub struct Replica {
    child: Child,
    stdin: Option<ChildStdin>,
    pub port: u16,
}

impl Replica {
    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGKILL (what `Child::kill` sends on Unix), then reap it.
    pub fn kill9(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
        self.stdin = None;
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill9();
    }
}

// ---------------------------------------------------------------------------
// The executions log.
// ---------------------------------------------------------------------------

/// The executions log, by key: one execution id per line.
#[derive(Debug, Default)]
pub struct Executions {
    pub by_key: HashMap<String, Vec<String>>,
    /// Lines that are not `call-1 notes.txt KEY EXECUTION` (a torn or interleaved write).
    pub malformed: Vec<String>,
    pub lines: usize,
}

impl Executions {
    fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut executions = Self::default();
        for line in text.lines() {
            executions.lines += 1;
            match line.split(' ').collect::<Vec<_>>()[..] {
                [CALL_ID, "notes.txt", key, execution] if execution.len() == 32 => {
                    executions.by_key.entry(key.to_owned()).or_default().push(execution.to_owned());
                }
                _ => executions.malformed.push(line.to_owned()),
            }
        }
        executions
    }

    /// How many times this key's call ran.
    pub fn count(&self, key: &str) -> usize {
        self.by_key.get(key).map_or(0, Vec::len)
    }
}

// ---------------------------------------------------------------------------
// HTTP.
// ---------------------------------------------------------------------------

/// A client for loopback replicas (no proxy, bounded waits).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(64)
        .build()
        .expect("a client")
}

/// A response read to its end.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    /// The JSON error code of an error response.
    pub fn error_code(&self) -> Option<String> {
        let body: Value = serde_json::from_str(&self.body).ok()?;
        body["error"]["code"].as_str().map(str::to_owned)
    }

    /// The SSE chunks of a stream that ended with `[DONE]`.
    pub fn chunks(&self) -> Result<Vec<Value>, String> {
        if !self.body.ends_with("data: [DONE]\n\n") {
            return Err(format!("the stream did not end with [DONE]: {}", self.body));
        }
        self.body
            .split("\n\n")
            .filter_map(|frame| frame.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).map_err(|error| format!("bad chunk `{data}`: {error}")))
            .collect()
    }

    /// The tool outcome the stream carries for the call.
    pub fn outcome(&self) -> Result<Outcome, String> {
        Ok(outcome_of(&self.chunks()?))
    }

    /// True when the stream was answered from the stored conversation
    /// (its text blocks have the ids `replay-N`) rather than by a run.
    pub fn replayed(&self) -> bool {
        self.chunks().unwrap_or_default().iter().any(|chunk| {
            chunk["type"] == "text-start" && chunk["id"].as_str().is_some_and(|id| id.starts_with("replay-"))
        })
    }

    /// The codes of the stream's `data-toolgate-warning` chunks.
    pub fn warnings(&self) -> Vec<String> {
        self.chunks()
            .unwrap_or_default()
            .iter()
            .filter(|chunk| chunk["type"] == "data-toolgate-warning")
            .filter_map(|chunk| chunk["data"]["code"].as_str().map(str::to_owned))
            .collect()
    }
}

/// POSTs JSON; a transport failure is an `Err`.
pub async fn post_json(client: &reqwest::Client, base: &str, path: &str, body: &Value) -> Result<Reply, String> {
    let response = client
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|error| format!("{error:?}"))?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(|error| format!("{error:?}"))?;
    Ok(Reply { status, body })
}

/// Opens the replica's store connections with a few concurrent reads, so a
/// burst right after startup measures the server rather than its connection pool.
pub async fn warm_up(client: &reqwest::Client, base: &str) {
    let reads = (0..16).map(|_| get(client, base, "/api/audit?limit=1"));
    for reply in futures::future::join_all(reads).await {
        let reply = reply.expect("the replica answers");
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
}

/// GETs a path; a transport failure is an `Err`.
pub async fn get(client: &reqwest::Client, base: &str, path: &str) -> Result<Reply, String> {
    let response = client.get(format!("{base}{path}")).send().await.map_err(|error| format!("{error:?}"))?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(|error| format!("{error:?}"))?;
    Ok(Reply { status, body })
}

// ---------------------------------------------------------------------------
// Bodies and outcomes.
// ---------------------------------------------------------------------------

/// An approval request and the assistant message holding it.
#[derive(Debug, Clone)]
pub struct Asked {
    pub approval_id: String,
    pub message_id: String,
}

fn user_message(key: &str) -> Value {
    json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": format!("delete notes.txt [key={key}]")}]})
}

/// The first turn of the chat `key`.
pub fn first_turn(key: &str) -> Value {
    json!({"id": key, "trigger": "submit-message", "messages": [user_message(key)]})
}

/// The continuation answering the first turn's request, as `useChat` sends it.
pub fn answered(key: &str, asked: &Asked, approved: bool) -> Value {
    let reason = if approved { Value::Null } else { json!("no") };
    json!({"id": key, "trigger": "submit-message", "messageId": asked.message_id, "messages": [
        user_message(key),
        {"id": asked.message_id, "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": CALL_ID, "state": "approval-responded",
             "input": {"path": "notes.txt"},
             "approval": {"id": asked.approval_id, "approved": approved, "reason": reason}}
        ]}
    ]})
}

/// Sends the first turn of chat `key` and reads its approval request.
pub async fn ask(client: &reqwest::Client, base: &str, key: &str) -> Result<Asked, String> {
    let reply = post_json(client, base, "/api/chat", &first_turn(key)).await?;
    if reply.status != 200 {
        return Err(format!("first turn of {key}: {} {}", reply.status, reply.body));
    }
    let chunks = reply.chunks()?;
    let request = chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request");
    let approval_id = request.and_then(|chunk| chunk["approvalId"].as_str());
    let message_id = chunks.first().and_then(|chunk| chunk["messageId"].as_str());
    match (approval_id, message_id) {
        (Some(approval_id), Some(message_id)) => {
            Ok(Asked { approval_id: approval_id.to_owned(), message_id: message_id.to_owned() })
        }
        _ => Err(format!("first turn of {key} without an approval request: {}", reply.body)),
    }
}

/// What a stream says happened to the call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `tool-output-available`.
    Output(Value),
    /// `tool-output-error`.
    Error(String),
    /// `tool-output-denied`.
    Denied,
    /// No outcome chunk for the call.
    Missing,
}

fn outcome_of(chunks: &[Value]) -> Outcome {
    let chunk = chunks.iter().find(|chunk| {
        chunk["toolCallId"] == CALL_ID && chunk["type"].as_str().is_some_and(|kind| kind.starts_with("tool-output"))
    });
    match chunk {
        Some(chunk) if chunk["type"] == "tool-output-available" => Outcome::Output(chunk["output"].clone()),
        Some(chunk) if chunk["type"] == "tool-output-error" => {
            Outcome::Error(chunk["errorText"].as_str().unwrap_or_default().to_owned())
        }
        Some(chunk) if chunk["type"] == "tool-output-denied" => Outcome::Denied,
        _ => Outcome::Missing,
    }
}

/// The JSON result a record stores, if it stores one.
pub fn stored_value(record: &ApprovalRecord) -> Option<Value> {
    let output = serde_json::to_value(record.output.as_ref()?).ok()?;
    (output["type"] == "json").then(|| output["value"].clone())
}

/// Milliseconds since the epoch (the ledger's clock).
pub fn now_millis() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// Waits until `ready` holds, polling every `every`, for at most `limit`.
pub async fn wait_until(limit: Duration, every: Duration, mut ready: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if ready().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}

/// A small deterministic generator (xorshift64*), seeded and printed by each test.
pub struct Rng(u64);

impl Rng {
    /// A generator from the clock; the seed is printed so a run can be repeated.
    pub fn from_clock(label: &str) -> Self {
        let seed = std::env::var("TOOLGATE_REPLICAS_SEED")
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or_else(|| now_millis().unsigned_abs() ^ 0x9e37_79b9_7f4a_7c15);
        eprintln!("{label}: seed {seed} (set TOOLGATE_REPLICAS_SEED to repeat)");
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..bound` (bound > 0).
    pub fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % bound as u64).unwrap_or(0)
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for index in (1..items.len()).rev() {
            let other = self.below(index + 1);
            items.swap(index, other);
        }
    }
}

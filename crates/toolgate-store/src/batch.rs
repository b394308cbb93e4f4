//! Group commit on SQLite: one thread owns the writing connection and runs,
//! in one transaction, every write operation queued while the previous
//! transaction ran.
//!
//! Handing an operation to the writer thread and its result back costs more
//! than most of the statements it runs, and every commit writes the log;
//! under concurrent load, operations share both instead of queueing for a
//! connection each.
//!
//! The contract:
//! - operations run one at a time in the order they were queued, each seeing
//!   the writes of those before it (the transaction holds the write lock
//!   from `BEGIN IMMEDIATE`, as a transaction of its own would);
//! - an operation's result is delivered after the transaction that holds its
//!   writes committed, never before; when `BEGIN` or `COMMIT` fails, every
//!   operation of the batch gets that error and none of their writes stays;
//! - a one-statement operation ([`BatchWriter::write_statement`]) that is
//!   alone in its batch runs without `BEGIN` and `COMMIT`: the statement is
//!   its own transaction (two round trips fewer when writes do not overlap);
//! - an operation that can bring its own transaction
//!   ([`BatchWriter::write_self_contained`]) is told so when it is alone in
//!   its batch, and then runs with `BEGIN IMMEDIATE` and `COMMIT` inside its
//!   own text (one round trip instead of three); when it fails, whatever it
//!   left open is rolled back before the writer goes on (a failure after its
//!   text committed, such as a row read back that does not decode, leaves the
//!   commit: the ledger's writes are conditional statements, so the caller
//!   sees an error over a state as valid as a crash right after the write);
//! - when an operation fails, the batch rolls back and each of its
//!   operations runs again in a transaction of its own, so one failure never
//!   undoes another operation's writes (operations are functions of their
//!   data and the database, so running one again is running it once);
//! - an operation runs once queued, whether or not its caller still waits
//!   (a ledger write a request started is not cut in half);
//! - when nothing is queued and the writer is idle, an operation runs at
//!   once on its caller's thread instead, alone, as above (two thread
//!   hand-offs fewer at low load); only where commits do not wait for the
//!   disk (`synchronous = NORMAL`) and the log is under its hard limit. It
//!   runs to its end in one poll (nothing on the writer's connection
//!   yields), so a caller that stops waiting cannot cut it in half; while
//!   another process holds the write lock it waits for it on that thread,
//!   as the writer thread would (up to the busy timeout);
//! - an operation that panics fails as [`StoreError::Unavailable`] like any
//!   failed operation (its batch rolls back and the others run again without
//!   it); the writer goes on.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::{Notify, mpsc, oneshot};
use toolgate::ledger::StoreError;

use crate::backend::{WriteFn, WriteFuture};
use crate::checkpoint::{LogGuard, WriteLock};
use crate::lite::{self, Conn, db_error};

/// The most operations one transaction holds.
const MAX_BATCH: usize = 64;
/// Queued operations before callers wait to queue.
const QUEUE: usize = 1024;

/// The handle to the writer thread.
#[derive(Debug)]
pub(crate) struct BatchWriter {
    queue: mpsc::Sender<Message>,
    shared: Arc<Shared>,
}

/// What the writer thread and the callers that write on their own thread share.
#[derive(Debug)]
struct Shared {
    /// The writing connection; `None` once closed.
    connection: WriteLock,
    /// Whether an operation may run on its caller's thread (see the module docs).
    inline: bool,
    commits: Arc<Notify>,
    guard: LogGuard,
}

impl Shared {
    /// After a commit: tells the checkpointer.
    fn committed(&self) {
        self.commits.notify_one();
    }
}

enum Message {
    Write(Box<dyn Job>),
    Close(oneshot::Sender<()>),
}

impl BatchWriter {
    /// Starts the writer thread on `connection`; it notifies `commits`
    /// after each commit and lets `guard` hold the log's size before the
    /// next one. With `inline`, an operation may run on its caller's thread
    /// (see the module docs). The thread ends once every handle is dropped
    /// or closed.
    pub(crate) fn start(
        connection: WriteLock,
        commits: Arc<Notify>,
        guard: LogGuard,
        inline: bool,
    ) -> std::io::Result<Self> {
        let (queue, messages) = mpsc::channel(QUEUE);
        let shared = Arc::new(Shared { connection, inline, commits, guard });
        // The operations' futures are ready when polled (lite.rs): the
        // thread's runtime only waits for the queue and the connection.
        lite::spawn_thread(WRITER_THREAD, write_loop(Arc::clone(&shared), messages))?;
        Ok(Self { queue, shared })
    }

    /// Queues `run` over `data` and waits for its committed result.
    pub(crate) async fn write<D, R>(&self, data: D, run: WriteFn<Conn, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.queue_write(data, run, Alone::InTransaction).await
    }

    /// As [`Self::write`], for an operation that runs one statement: alone
    /// in its batch, it runs without a transaction of its own.
    pub(crate) async fn write_statement<D, R>(&self, data: D, run: WriteFn<Conn, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.queue_write(data, run, Alone::AsItIs).await
    }

    /// As [`Self::write`], for an operation that can run in a transaction of
    /// its own making: alone in its batch, `own_transaction` is applied to its
    /// data first, and the operation then opens and commits the transaction
    /// itself (in the same text as its statements).
    pub(crate) async fn write_self_contained<D, R>(
        &self,
        data: D,
        run: WriteFn<Conn, D, R>,
        own_transaction: fn(&mut D),
    ) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.queue_write(data, run, Alone::OwnTransaction(own_transaction)).await
    }

    async fn queue_write<D, R>(&self, data: D, run: WriteFn<Conn, D, R>, alone: Alone<D>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Operation { data, run, alone, result: None, reply: Some(reply) });
        match self.idle_connection() {
            Some(mut connection) => {
                let Some(connection) = connection.as_mut() else { return Err(closed()) };
                let mut batch = vec![job];
                run_batch(connection, &mut batch).await;
                self.shared.committed();
            }
            None => self.queue.send(Message::Write(job)).await.map_err(|_| closed())?,
        }
        answer.await.map_err(|_| closed())?
    }

    /// The writing connection, when an operation may run on its caller's
    /// thread now: allowed, nothing queued, the writer idle and the log
    /// under its hard limit.
    fn idle_connection(&self) -> Option<tokio::sync::MutexGuard<'_, Option<Conn>>> {
        let shared = &self.shared;
        // A message in the queue is an operation the writer has not taken (a
        // taken one holds its place on the lock: `try_lock` fails while it waits).
        if !shared.inline || self.queue.capacity() < self.queue.max_capacity() {
            return None;
        }
        let connection = shared.connection.try_lock().ok()?;
        (!shared.guard.over_limit()).then_some(connection)
    }

    /// Runs what is queued before this call, then closes the connection;
    /// writes queued later fail as unavailable.
    pub(crate) async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.queue.send(Message::Close(done)).await.is_ok() {
            let _ = closed.await;
        }
    }
}

fn closed() -> StoreError {
    StoreError::Unavailable("the approval store is closed".into())
}

/// One queued operation with its data, result and caller.
trait Job: Send {
    /// Runs the operation, keeping its result.
    fn run<'c>(&'c mut self, connection: &'c mut Conn) -> WriteFuture<'c, ()>;
    /// Delivers the kept result, or `failure`.
    fn finish(&mut self, failure: Option<StoreError>);
    /// Readies the operation to run alone in its batch, and says how it runs then.
    fn run_alone(&mut self) -> AloneRun;
}

/// How an operation runs when it is alone in its batch.
enum Alone<D> {
    /// In a transaction the writer opens, as in a batch.
    InTransaction,
    /// As it is: one statement, atomic on its own.
    AsItIs,
    /// In a transaction the operation opens itself, once this is applied to its data.
    OwnTransaction(fn(&mut D)),
}

/// [`Alone`], without the data.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AloneRun {
    InTransaction,
    AsItIs,
    OwnTransaction,
}

struct Operation<D, R> {
    data: D,
    run: WriteFn<Conn, D, R>,
    alone: Alone<D>,
    result: Option<R>,
    reply: Option<oneshot::Sender<Result<R, StoreError>>>,
}

impl<D: Send + Sync, R: Send> Job for Operation<D, R> {
    fn run<'c>(&'c mut self, connection: &'c mut Conn) -> WriteFuture<'c, ()> {
        Box::pin(async move {
            // A panic is a failure: the batch's transaction rolls back (a lone
            // statement is atomic on its own, applied whole or not at all).
            let run = AssertUnwindSafe((self.run)(connection, &self.data)).catch_unwind();
            match run.await {
                Ok(result) => {
                    self.result = Some(result?);
                    Ok(())
                }
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|text| (*text).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".to_owned());
                    tracing::error!(panic = %what, "a ledger write panicked");
                    Err(StoreError::Unavailable(format!("a ledger write panicked: {what}")))
                }
            }
        })
    }

    fn finish(&mut self, failure: Option<StoreError>) {
        let outcome = match (failure, self.result.take()) {
            (Some(error), _) => Err(error),
            (None, Some(result)) => Ok(result),
            (None, None) => Err(StoreError::Unavailable("a queued write did not run".into())),
        };
        if let Some(reply) = self.reply.take() {
            // A caller that stopped waiting needs no answer.
            let _ = reply.send(outcome);
        }
    }

    fn run_alone(&mut self) -> AloneRun {
        match self.alone {
            Alone::InTransaction => AloneRun::InTransaction,
            Alone::AsItIs => AloneRun::AsItIs,
            Alone::OwnTransaction(own_transaction) => {
                own_transaction(&mut self.data);
                AloneRun::OwnTransaction
            }
        }
    }
}

/// Why a transaction of operations did not commit.
enum Failure {
    /// `BEGIN` or `COMMIT` failed: no operation's writes stayed.
    Transaction(StoreError),
    /// An operation failed; the transaction rolled back.
    Operation(StoreError),
}

/// The writer thread's name.
const WRITER_THREAD: &str = "toolgate-sqlite-writer";

async fn write_loop(shared: Arc<Shared>, mut messages: mpsc::Receiver<Message>) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = messages.recv().await {
        // The connection first: what is queued while a caller writes on its
        // own thread joins this batch.
        let mut connection = shared.connection.lock().await;
        let mut close = None;
        match first {
            Message::Write(job) => batch.push(job),
            Message::Close(done) => close = Some(done),
        }
        while close.is_none() && batch.len() < MAX_BATCH {
            match messages.try_recv() {
                Ok(Message::Write(job)) => batch.push(job),
                Ok(Message::Close(done)) => close = Some(done),
                Err(_) => break,
            }
        }
        if let Some(open) = connection.as_mut()
            && !batch.is_empty()
        {
            run_batch(open, &mut batch).await;
            shared.committed();
            shared.guard.hold(open).await;
        }
        // Jobs left (the connection closed) are dropped unanswered, which reads as closed.
        batch.clear();
        if let Some(done) = close {
            drop(connection.take());
            let _ = done.send(());
            return;
        }
    }
}

/// Runs the batch in one transaction, or each operation alone after one
/// failed; a lone operation that needs no transaction from the writer runs
/// as it is, or in the transaction it opens itself.
async fn run_batch(connection: &mut Conn, batch: &mut Vec<Box<dyn Job>>) {
    if let [job] = batch.as_mut_slice() {
        let how = job.run_alone();
        if how != AloneRun::InTransaction {
            let failure = job.run(connection).await.err();
            if failure.is_some() && how == AloneRun::OwnTransaction {
                roll_back_what_is_open(connection).await;
            }
            job.finish(failure);
            batch.clear();
            return;
        }
    }
    let failure = match together(connection, batch).await {
        Ok(()) => None,
        Err(Failure::Operation(_)) if batch.len() > 1 => {
            for job in batch.iter_mut() {
                let failure = together(connection, std::slice::from_mut(job)).await.err();
                job.finish(failure.map(Failure::into_error));
            }
            batch.clear();
            return;
        }
        Err(failure) => Some(failure.into_error()),
    };
    for mut job in batch.drain(..) {
        job.finish(failure.clone());
    }
}

async fn together(connection: &mut Conn, jobs: &mut [Box<dyn Job>]) -> Result<(), Failure> {
    lite::query("BEGIN IMMEDIATE")
        .execute(&mut *connection)
        .await
        .map_err(|error| Failure::Transaction(db_error(error)))?;
    for job in jobs.iter_mut() {
        if let Err(error) = job.run(connection).await {
            roll_back_what_is_open(connection).await;
            return Err(Failure::Operation(error));
        }
    }
    if let Err(error) = lite::query("COMMIT").execute(&mut *connection).await {
        // A commit that failed may leave the transaction open (SQLITE_BUSY).
        roll_back_what_is_open(connection).await;
        return Err(Failure::Transaction(db_error(error)));
    }
    Ok(())
}

/// Rolls back a transaction an operation opened and did not end; with none
/// open, SQLite refuses the `ROLLBACK`, which is what should happen.
async fn roll_back_what_is_open(connection: &mut Conn) {
    if let Err(error) = lite::query("ROLLBACK").execute(&mut *connection).await {
        tracing::debug!(%error, "nothing to roll back after a failed write");
    }
}

impl Failure {
    fn into_error(self) -> StoreError {
        match self {
            Self::Transaction(error) | Self::Operation(error) => error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer over a private database holding the table `t (v INTEGER)`,
    /// every write on its thread (`inline` false) or lone ones on the caller's.
    async fn writer_over_a_table_with(inline: bool) -> BatchWriter {
        let mut connection = Conn::memory().unwrap();
        lite::query("CREATE TABLE t (v INTEGER)").execute(&mut connection).await.unwrap();
        let guard = LogGuard::new(std::path::Path::new(":memory:"));
        let connection = Arc::new(tokio::sync::Mutex::new(Some(connection)));
        BatchWriter::start(connection, Arc::default(), guard, inline).unwrap()
    }

    async fn writer_over_a_table() -> BatchWriter {
        writer_over_a_table_with(false).await
    }

    /// Whether the operation runs on the writer thread.
    fn on_the_writer_thread<'c>(_: &'c mut Conn, _: &'c ()) -> WriteFuture<'c, bool> {
        Box::pin(async move { Ok(std::thread::current().name() == Some(WRITER_THREAD)) })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_writer_lets_a_lone_write_run_on_its_callers_thread_and_queues_the_rest() {
        let writer = writer_over_a_table_with(true).await;
        assert_eq!(writer.write((), on_the_writer_thread).await, Ok(false), "idle: on the caller's thread");
        assert!(writer.write_statement((), outside_a_transaction).await.unwrap(), "a lone statement as it is");
        assert!(!writer.write((), outside_a_transaction).await.unwrap(), "other writes in a transaction");
        writer.write_self_contained((1, false, false), insert_self_contained, own).await.unwrap();
        assert!(writer.write_self_contained((2, true, false), insert_self_contained, own).await.is_err());
        assert!(writer.write_statement((), outside_a_transaction).await.unwrap(), "the failed one rolled back");
        // While a caller holds the connection, writes queue for the writer thread, which runs them after it.
        let held = writer.shared.connection.lock().await;
        let queued = {
            let writer = &writer;
            async move { tokio::join!(writer.write((), on_the_writer_thread), writer.write(3, insert)) }
        };
        let (queued, ()) = tokio::join!(queued, async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            drop(held);
        });
        assert_eq!(queued, (Ok(true), Ok(())), "queued behind the busy connection: on the writer thread");
        assert_eq!(writer.write((), values).await.unwrap(), vec![1, 3]);
        writer.close().await;
        let refused = writer.write(4, insert).await;
        assert!(matches!(&refused, Err(StoreError::Unavailable(why)) if why.contains("closed")), "{refused:?}");
    }

    fn insert<'c>(connection: &'c mut Conn, value: &'c i64) -> WriteFuture<'c, ()> {
        Box::pin(async move {
            lite::query("INSERT INTO t (v) VALUES ($1)").bind(value).execute(connection).await.map_err(db_error)?;
            Ok(())
        })
    }

    fn insert_then_panic<'c>(connection: &'c mut Conn, value: &'c i64) -> WriteFuture<'c, ()> {
        Box::pin(async move {
            insert(connection, value).await?;
            panic!("boom {value}");
        })
    }

    fn values<'c>(connection: &'c mut Conn, _: &'c ()) -> WriteFuture<'c, Vec<i64>> {
        Box::pin(async move {
            lite::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(connection).await.map_err(db_error)
        })
    }

    fn clear<'c>(connection: &'c mut Conn, _: &'c ()) -> WriteFuture<'c, ()> {
        Box::pin(async move {
            lite::query("DELETE FROM t").execute(connection).await.map_err(db_error)?;
            Ok(())
        })
    }

    fn insert_elsewhere<'c>(connection: &'c mut Conn, value: &'c i64) -> WriteFuture<'c, ()> {
        Box::pin(async move {
            lite::query("INSERT INTO missing (v) VALUES ($1)")
                .bind(value)
                .execute(connection)
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    /// True when the operation runs outside a transaction (a `BEGIN` of its own
    /// succeeds only then; it is rolled back at once).
    fn outside_a_transaction<'c>(connection: &'c mut Conn, _: &'c ()) -> WriteFuture<'c, bool> {
        Box::pin(async move {
            if lite::query("BEGIN").execute(&mut *connection).await.is_err() {
                return Ok(false);
            }
            lite::query("ROLLBACK").execute(connection).await.map_err(db_error)?;
            Ok(true)
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_statement_runs_as_its_own_transaction() {
        let writer = writer_over_a_table().await;
        assert!(writer.write_statement((), outside_a_transaction).await.unwrap(), "no BEGIN around a lone statement");
        assert!(!writer.write((), outside_a_transaction).await.unwrap(), "every other write runs in a transaction");
        writer.write_statement(1, insert).await.unwrap();
        let failed = writer.write_statement(2, insert_elsewhere).await;
        assert!(matches!(&failed, Err(StoreError::Unavailable(message)) if message.contains("missing")), "{failed:?}");
        // Queued together, statements share one transaction; one failing does not undo the others.
        let (a, b, c) = tokio::join!(
            writer.write_statement(3, insert),
            writer.write_statement(4, insert_elsewhere),
            writer.write_statement(5, insert)
        );
        assert_eq!((a, c), (Ok(()), Ok(())));
        assert!(b.is_err());
        assert_eq!(writer.write((), values).await.unwrap(), vec![1, 3, 5]);
        writer.close().await;
    }

    /// Inserts `value` in a transaction of its own making when told to (then
    /// failing after the insert if `fail`), else in the writer's; says which.
    fn insert_self_contained<'c>(
        connection: &'c mut Conn,
        (value, fail, own): &'c (i64, bool, bool),
    ) -> WriteFuture<'c, bool> {
        Box::pin(async move {
            if !*own {
                insert(&mut *connection, value).await?;
                return Ok(false);
            }
            let then = if *fail { "INSERT INTO missing (v) VALUES ($1)" } else { "SELECT $1" };
            let text = format!("BEGIN IMMEDIATE; INSERT INTO t (v) VALUES ($1); {then}; COMMIT");
            lite::query(lite::AssertSqlSafe(text)).bind(value).execute(connection).await.map_err(db_error)?;
            Ok(true)
        })
    }

    fn own(data: &mut (i64, bool, bool)) {
        data.2 = true;
    }

    #[tokio::test]
    async fn a_lone_self_contained_write_brings_its_own_transaction_and_a_failed_one_is_rolled_back() {
        let writer = writer_over_a_table().await;
        assert_eq!(writer.write_self_contained((1, false, false), insert_self_contained, own).await, Ok(true));
        // The failed one stopped inside its transaction, after its insert: the writer rolls it back.
        assert!(writer.write_self_contained((2, true, false), insert_self_contained, own).await.is_err());
        assert!(writer.write_statement((), outside_a_transaction).await.unwrap(), "no transaction left open");
        assert_eq!(writer.write_self_contained((3, false, false), insert_self_contained, own).await, Ok(true));
        // Queued together (both while the connection is held), they share the writer's transaction and are not
        // told otherwise.
        let held = writer.shared.connection.lock().await;
        let ((a, b), ()) = tokio::join!(
            async {
                tokio::join!(
                    writer.write_self_contained((4, false, false), insert_self_contained, own),
                    writer.write_self_contained((5, false, false), insert_self_contained, own),
                )
            },
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                drop(held);
            }
        );
        assert_eq!((a, b), (Ok(false), Ok(false)), "in the writer's transaction");
        assert_eq!(writer.write((), values).await.unwrap(), vec![1, 3, 4, 5], "nothing of the failed write stayed");
        writer.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_write_fails_alone_and_the_writer_goes_on() {
        let writer = writer_over_a_table().await;
        for _ in 0..3 {
            let (before, panicked, after) =
                tokio::join!(writer.write(1, insert), writer.write(2, insert_then_panic), writer.write(3, insert));
            assert_eq!((before, after), (Ok(()), Ok(())), "the others' writes stand");
            match panicked {
                Err(StoreError::Unavailable(message)) => assert!(message.contains("boom 2"), "{message}"),
                other => panic!("expected the panic as an error: {other:?}"),
            }
            writer.write((), clear).await.unwrap();
        }
        assert_eq!(writer.write((), values).await.unwrap(), Vec::<i64>::new(), "nothing of the panicked write stayed");
        writer.close().await;
    }
}

//! The responses running now, by chat: each one's frames, kept while it runs
//! so a client that lost its connection can reattach (`GET
//! /api/chat/{id}/stream`, in `api/stream_resume.rs`). The run context (`run/context.rs`) holds one registry;
//! this file imports nothing of the server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use tokio::sync::Notify;

/// The responses running now, by chat id.
#[derive(Debug, Default)]
pub(crate) struct RunningResponses {
    by_chat: Mutex<HashMap<String, Arc<ResponseLog>>>,
}

/// The frames of one running response.
#[derive(Debug, Default)]
pub(crate) struct ResponseLog {
    /// Who started the response.
    pub(crate) principal: Option<String>,
    /// The frames so far, and whether the response ended.
    pub(crate) frames: Mutex<LogState>,
    /// Notified at each frame and at the end.
    pub(crate) changed: Notify,
}

/// A response's frames so far.
#[derive(Debug, Default)]
pub(crate) struct LogState {
    /// Every frame, in order.
    pub(crate) frames: Vec<Bytes>,
    /// The response ended.
    pub(crate) done: bool,
}

impl RunningResponses {
    /// Starts the log of a new response of a chat, by its conversation key (a
    /// newer response replaces an older one).
    pub(crate) fn start(self: &Arc<Self>, chat_id: &str, principal: Option<String>) -> RunningResponse {
        let log = Arc::new(ResponseLog { principal, ..ResponseLog::default() });
        lock(&self.by_chat).insert(chat_id.to_owned(), Arc::clone(&log));
        RunningResponse { responses: Arc::clone(self), chat_id: chat_id.to_owned(), log }
    }

    /// The log of a chat's running response, if one runs.
    pub(crate) fn get(&self, chat_id: &str) -> Option<Arc<ResponseLog>> {
        lock(&self.by_chat).get(chat_id).cloned()
    }
}

/// The writer's end of a response log; ends the log when dropped, however the response ended.
pub(crate) struct RunningResponse {
    responses: Arc<RunningResponses>,
    chat_id: String,
    log: Arc<ResponseLog>,
}

impl RunningResponse {
    /// Records one frame.
    pub(crate) fn push(&self, frame: &Bytes) {
        lock(&self.log.frames).frames.push(frame.clone());
        self.log.changed.notify_waiters();
    }
}

impl Drop for RunningResponse {
    fn drop(&mut self) {
        lock(&self.log.frames).done = true;
        self.log.changed.notify_waiters();
        let mut by_chat = lock(&self.responses.by_chat);
        if by_chat.get(&self.chat_id).is_some_and(|log| Arc::ptr_eq(log, &self.log)) {
            by_chat.remove(&self.chat_id);
        }
    }
}

/// Locks a log (a poisoned lock is taken as it is).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each critical section is a push or a copy: a panic cannot leave it half done.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

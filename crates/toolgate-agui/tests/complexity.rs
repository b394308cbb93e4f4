//! Preparing a resume is linear in the size of the input: a forged state
//! listing P pending interrupts, P resume entries and P tool calls costs
//! about 4x as much for 4P, not 16x. Compared as the best of several runs of
//! each size (a ratio of two sizes, not a time limit), plus a check that the
//! allocations grow linearly too.
//!
//! One test in this binary: the counting allocator is global.

use std::alloc::System;
use std::time::{Duration, Instant};

use serde_json::json;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use toolgate_agui::{RunAgentInput, prepare_run};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const P: usize = 1500;

/// One assistant message per call (so the history is long too), every call pending and answered.
fn input(p: usize) -> RunAgentInput {
    let mut messages = vec![json!({"id": "u1", "role": "user", "content": "delete them all"})];
    let mut pending = Vec::with_capacity(p);
    let mut resume = Vec::with_capacity(p);
    for i in 0..p {
        messages.push(json!({"id": format!("a{i}"), "role": "assistant", "toolCalls": [
            {"id": format!("call-{i}"), "type": "function",
             "function": {"name": "delete_file", "arguments": format!("{{\"path\":\"f{i}.txt\"}}")}}
        ]}));
        pending.push(
            json!({"interruptId": format!("apr_{i}"), "toolCallId": format!("call-{i}"), "toolName": "delete_file"}),
        );
        // Answered in reverse order, so a search from the front finds each one last.
        resume.push(json!({"interruptId": format!("apr_{}", p - 1 - i), "status": "resolved", "payload": {"approved": i % 2 == 0}}));
    }
    let value = json!({
        "threadId": "t", "runId": "r", "tools": [], "context": [], "forwardedProps": {},
        "state": {"toolgate": {"pendingApprovals": pending}}, "messages": messages, "resume": resume
    });
    RunAgentInput::from_value(value).expect("a valid input")
}

fn best_time(input: &RunAgentInput) -> Duration {
    (0..7)
        .map(|_| {
            let started = Instant::now();
            let prepared = prepare_run(input).expect("the resume is valid");
            let elapsed = started.elapsed();
            assert_eq!(prepared.resolutions.len(), input.resume.as_ref().map_or(0, Vec::len));
            elapsed
        })
        .min()
        .unwrap_or_default()
}

fn bytes(input: &RunAgentInput) -> usize {
    let region = Region::new(GLOBAL);
    let prepared = prepare_run(input).expect("the resume is valid");
    let allocated = region.change().bytes_allocated;
    drop(prepared);
    allocated
}

#[test]
fn preparing_a_resume_is_linear_in_its_size() {
    let (small, large) = (input(P), input(4 * P));
    let (small_time, large_time) = (best_time(&small), best_time(&large));
    let time_ratio = large_time.as_secs_f64() / small_time.as_secs_f64();
    let byte_ratio = bytes(&large) as f64 / bytes(&small) as f64;
    println!("P = {P}: {small_time:?}; 4P: {large_time:?}; time ratio {time_ratio:.1}, bytes ratio {byte_ratio:.2}");
    assert!(byte_ratio < 6.0, "4x the interrupts allocate {byte_ratio:.1}x the bytes");
    assert!(time_ratio < 10.0, "4x the interrupts take {time_ratio:.1}x the time: the work is not linear");
}

//! How branches end: returned by their caller, force-returned by session
//! end, a parent's return or an exhausted budget, or expired at their
//! deadline. Every way goes through `end_branch` (exactly once per branch)
//! and appends one `branch_return` commit to the parent's chain.

use futures::future::BoxFuture;

use chrono::{DateTime, Utc};

use super::memory::{ChainTip, Ending};
use super::{
    Expired, MAX_ERROR, MAX_MESSAGE, Sweep, Wake, branch_principal, check_len, session_ref,
    strip_controls,
};
use crate::auth::Caller;
use crate::branch::{BranchRecord, BranchStatus, EndedSession, Finish, ReturnedBranch, branch_ref};
use crate::commit::{Commit, Tags, Trigger};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::id::{BranchId, CommitId, SessionId, TenantId};
use crate::service::{NewCommit, Service};
use crate::store::RefMove;

/// How often a return retries when the parent's chain moves under it.
const APPEND_ATTEMPTS: usize = 8;

impl Service {
    /// `branch_return`: force-returns the branch's active children (deepest
    /// first), scrubs the message and appends it to the parent's chain as
    /// one `branch_return` commit.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` when it already ended; `Invalid` for an
    /// over-long message; the scrubber's error (nothing is appended).
    pub async fn branch_return(
        &self,
        caller: &Caller,
        id: &BranchId,
        message: &str,
    ) -> Result<ReturnedBranch> {
        self.return_branch(caller, id, message, None).await
    }

    /// `branch_return` with a failure (FR-008): the agent ends its own
    /// branch early as failed. Its children are force-returned first; the
    /// parent's chain gets the error context (the error, the branch's
    /// description and what the agent adds in `message`), scrubbed, as one
    /// `branch_return` commit tagged `branch_status: failed`; the record
    /// keeps the scrubbed error as its reason.
    ///
    /// # Errors
    /// `Invalid` (field `error`) for a blank or over-long error, `message`
    /// for an over-long message; `NotFound`; `Conflict` when it already
    /// ended; the scrubber's error (nothing is appended).
    pub async fn branch_fail(
        &self,
        caller: &Caller,
        id: &BranchId,
        error: &str,
        message: &str,
    ) -> Result<ReturnedBranch> {
        self.return_branch(caller, id, message, Some(error)).await
    }

    async fn return_branch(
        &self,
        caller: &Caller,
        id: &BranchId,
        message: &str,
        error: Option<&str>,
    ) -> Result<ReturnedBranch> {
        let f = self.branching_or_err()?.clone();
        let tenant = &caller.tenant;
        let message = strip_controls(message, true);
        check_len("message", &message, MAX_MESSAGE)?;
        let error = match error {
            Some(e) => {
                let e = strip_controls(e, true);
                let e = e.trim();
                if e.is_empty() {
                    return Err(Error::invalid(
                        "error",
                        "a failed return needs an error: say what went wrong",
                    ));
                }
                check_len("error", e, MAX_ERROR)?;
                Some(e.to_owned())
            }
            None => None,
        };
        let rec = self.visible_branch(caller, id).await?;
        if rec.status != BranchStatus::Active {
            return Err(Error::conflict(
                format!("branch {id} already ended: it is {}", rec.status),
                Some(rec.status.as_str().to_owned()),
            )
            .with_field("branch_id"));
        }
        // Fail closed: no scrub, no return.
        let (status, reason, scrubbed) = match &error {
            None => (BranchStatus::Completed, None, f.scrubber.scrub(&message)?),
            Some(e) => {
                let reason = f.scrubber.scrub(e)?.text;
                let mut text = format!("[branch {id} failed: {e}] {}", rec.description);
                if !message.trim().is_empty() {
                    text.push('\n');
                    text.push_str(&message);
                }
                (BranchStatus::Failed, Some(reason), f.scrubber.scrub(&text)?)
            }
        };
        let force_returned = self.force_return_descendants(tenant, &rec).await?;
        let (done, commit) = self
            .end_branch(tenant, &rec, status, reason, Some(scrubbed.text.clone()))
            .await?;
        Ok(ReturnedBranch {
            success: status == BranchStatus::Completed,
            tokens_used: done.tokens_used,
            message: scrubbed.text,
            commit,
            redactions: scrubbed.redactions,
            force_returned,
        })
    }

    /// Session end: force-returns every active branch of the session,
    /// deepest first, within the configured time; what does not finish in
    /// time (or errors) is marked failed, with its error context appended
    /// to its parent.
    ///
    /// # Errors
    /// `NotFound` for another principal's session (strict mode).
    pub async fn session_end(&self, caller: &Caller, session: &SessionId) -> Result<EndedSession> {
        let session = session.as_str();
        self.check_session_owner(caller, session).await?;
        self.end_session_branches(&caller.tenant, session, "session ended")
            .await
    }

    /// Force-returns `session`'s active branches, deepest first, each with
    /// `reason`, within the session end timeout (the rest end failed).
    async fn end_session_branches(
        &self,
        tenant: &TenantId,
        session: &str,
        reason: &str,
    ) -> Result<EndedSession> {
        let f = self.branching_or_err()?.clone();
        let mut active = f.store.active_branches(tenant, session).await?;
        active.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.id.cmp(&b.id)));
        let limit = chrono::Duration::from_std(f.config.session_end_timeout)
            .unwrap_or(chrono::Duration::MAX);
        let deadline = self.clock().now() + limit;
        let started = tokio::time::Instant::now();
        let mut out = EndedSession {
            session_id: session.to_owned(),
            returned: Vec::new(),
            failed: Vec::new(),
        };
        for a in active {
            let Some(rec) = f.store.get_branch(tenant, &a.id).await? else {
                continue;
            };
            if rec.status != BranchStatus::Active {
                continue;
            }
            let left = f
                .config
                .session_end_timeout
                .saturating_sub(started.elapsed());
            let in_time = self.clock().now() < deadline && !left.is_zero();
            let result = if in_time {
                tokio::time::timeout(
                    left,
                    self.end_branch(
                        tenant,
                        &rec,
                        BranchStatus::Completed,
                        Some(reason.into()),
                        None,
                    ),
                )
                .await
                .unwrap_or_else(|_| Err(Error::unavailable("session end ran out of time")))
            } else {
                Err(Error::unavailable("session end ran out of time"))
            };
            match result {
                Ok(_) => out.returned.push(rec.id),
                Err(e) if e.kind == ErrorKind::Conflict => {}
                Err(e) => {
                    let reason = format!("{reason} before it finished: {}", e.message);
                    match self
                        .end_branch(tenant, &rec, BranchStatus::Failed, Some(reason), None)
                        .await
                    {
                        Ok(_) => out.failed.push(rec.id),
                        Err(e2) if e2.kind == ErrorKind::Conflict => {
                            // It ended meanwhile (the timed-out return won).
                            out.returned.push(rec.id);
                        }
                        Err(e2) => return Err(e2),
                    }
                }
            }
        }
        Ok(out)
    }

    /// Expires a branch whose deadline has passed: its active children are
    /// force-returned, then it ends with status timeout and what it has is
    /// appended to its parent. Idempotent.
    ///
    /// # Errors
    /// `Unavailable` when storage fails (the caller retries).
    pub async fn branch_expire(&self, tenant: &TenantId, id: &BranchId) -> Result<Expired> {
        let f = self.branching_or_err()?.clone();
        let Some(rec) = f.store.get_branch(tenant, id).await? else {
            return Ok(Expired::Unknown);
        };
        if rec.status != BranchStatus::Active {
            return Ok(Expired::AlreadyEnded);
        }
        // A timer may fire a little early by this clock: allow 1 s.
        if self.clock().now() + chrono::Duration::seconds(1) < rec.deadline {
            return Ok(Expired::NotDue);
        }
        self.force_return_descendants(tenant, &rec).await?;
        let secs = (rec.deadline - rec.created_at).num_seconds();
        match self
            .end_branch(
                tenant,
                &rec,
                BranchStatus::Timeout,
                Some(format!("timed out after {secs} s")),
                None,
            )
            .await
        {
            Ok(_) => Ok(Expired::TimedOut),
            Err(e) if e.kind == ErrorKind::Conflict => Ok(Expired::AlreadyEnded),
            Err(e) => Err(e),
        }
    }

    /// What a branch's timer does when it wakes: expires the branch at its
    /// deadline; before it, with `CTX_SESSION_IDLE_SECS` set, force-returns
    /// the session's active branches when none saw activity for that long
    /// (a checkpoint into its chain, a new branch), or says when to look
    /// again.
    ///
    /// # Errors
    /// `Unavailable` when storage fails (the caller retries).
    pub async fn branch_wake(&self, tenant: &TenantId, id: &BranchId) -> Result<Wake> {
        let f = self.branching_or_err()?.clone();
        let Some(rec) = f.store.get_branch(tenant, id).await? else {
            return Ok(Wake::Expired(Expired::Unknown));
        };
        if rec.status != BranchStatus::Active {
            return Ok(Wake::Expired(Expired::AlreadyEnded));
        }
        let now = self.clock().now();
        let due = |at: DateTime<Utc>| now + chrono::Duration::seconds(1) >= at;
        if due(rec.deadline) {
            return self.branch_expire(tenant, id).await.map(Wake::Expired);
        }
        let Some(idle) = f
            .config
            .session_idle
            .and_then(|d| chrono::Duration::from_std(d).ok())
        else {
            return Ok(Wake::Later(rec.deadline));
        };
        let last = self.session_activity(tenant, &rec.session_id).await?;
        if due(last + idle) {
            let reason = format!("session idle for {} s", idle.num_seconds());
            return self
                .end_session_branches(tenant, &rec.session_id, &reason)
                .await
                .map(Wake::Idle);
        }
        Ok(Wake::Later((last + idle).min(rec.deadline)))
    }

    /// When `session` last saw activity: the newest move of its chain
    /// (`sessions/<S>`) and of its active branches' chains (each made when
    /// its branch was created, moved by every checkpoint into it).
    async fn session_activity(&self, tenant: &TenantId, session: &str) -> Result<DateTime<Utc>> {
        let f = self.branching_or_err()?.clone();
        let meta = &self.stores().meta;
        let mut last = DateTime::<Utc>::MIN_UTC;
        let chains = f
            .store
            .active_branches(tenant, session)
            .await?
            .into_iter()
            .map(|a| branch_ref(&a.id))
            .chain(session_ref(session).ok());
        for name in chains {
            if let Some(r) = meta.get_ref(tenant, &name).await? {
                last = last.max(r.updated_at);
            }
        }
        Ok(last)
    }

    /// When a new branch's timer should first wake: its deadline, or
    /// sooner when idle sessions end (`CTX_SESSION_IDLE_SECS`).
    pub(super) fn first_wake(
        &self,
        created: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> DateTime<Utc> {
        self.branching()
            .and_then(|f| f.config.session_idle)
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .map_or(deadline, |idle| (created + idle).min(deadline))
    }

    /// The embedded server's start-up sweep: expires every branch whose
    /// deadline passed while it was down, and re-arms the timers of the
    /// rest. Logs what it did.
    ///
    /// # Errors
    /// `Unavailable` when storage fails.
    pub async fn branch_sweep(&self) -> Result<Sweep> {
        let f = self.branching_or_err()?.clone();
        let mut sweep = Sweep::default();
        let Some(all) = f.store.all_active().await? else {
            return Ok(sweep);
        };
        let now = self.clock().now();
        for (tenant, id, deadline) in all {
            if deadline <= now {
                if self.branch_expire(&tenant, &id).await? == Expired::TimedOut {
                    sweep.expired += 1;
                }
            } else {
                f.timer
                    .start(&tenant, &id, self.first_wake(now, deadline))
                    .await?;
                sweep.rearmed += 1;
            }
        }
        if sweep.expired + sweep.rearmed > 0 {
            tracing::info!(
                expired = sweep.expired,
                rearmed = sweep.rearmed,
                "branch deadlines on open"
            );
        }
        Ok(sweep)
    }

    /// Ends `rec` with `status` (exactly once: a second end is a
    /// `Conflict`) and appends `message`, or for a forced end what the
    /// branch has, to its parent's chain. Returns the ended record and the
    /// appended commit.
    pub(super) fn end_branch<'a>(
        &'a self,
        tenant: &'a TenantId,
        rec: &'a BranchRecord,
        status: BranchStatus,
        reason: Option<String>,
        message: Option<String>,
    ) -> BoxFuture<'a, Result<(BranchRecord, CommitId)>> {
        Box::pin(async move {
            let f = self.branching_or_err()?.clone();
            let done = f
                .store
                .finish_branch(
                    tenant,
                    &rec.id,
                    &Finish {
                        status,
                        at: self.clock().now(),
                        reason: reason.clone(),
                    },
                )
                .await?;
            let ending = if message.is_some() {
                Ending::Own
            } else {
                Ending::Forced
            };
            // The chain's tip is read once, for the forced text and the
            // memory both.
            let tip = if message.is_none() || f.config.memory.extract {
                self.chain_tip(tenant, &done).await
            } else {
                ChainTip::default()
            };
            let text = match message {
                Some(m) => m,
                None => self.forced_text(&done, &tip),
            };
            let outcome = f.config.memory.extract.then(|| text.clone());
            let commit = self.append_to_parent(tenant, &done, text).await?;
            f.store
                .annotate(tenant, &rec.id, None, Some(&commit.id))
                .await?;
            if let Some(outcome) = outcome
                && let Err(e) = self
                    .extract_memory(tenant, &done, &outcome, ending, commit.id, &tip)
                    .await
            {
                tracing::warn!(branch = %rec.id, error = %e, "could not extract the branch's memory");
            }
            if status != BranchStatus::Timeout
                && let Err(e) = f.timer.stop(tenant, &rec.id, done.timer.as_deref()).await
            {
                tracing::warn!(branch = %rec.id, error = %e, "could not stop the branch timer");
            }
            let mut done = done;
            done.return_commit = Some(commit.id);
            Ok((done, commit.id))
        })
    }

    /// The tip of `rec`'s chain and, past its root, the tip's delta as text
    /// (lossily; none when it cannot be read).
    pub(super) async fn chain_tip(&self, tenant: &TenantId, rec: &BranchRecord) -> ChainTip {
        let Ok(Some(r)) = self.stores().meta.get_ref(tenant, &rec.chain_ref()).await else {
            return ChainTip::default();
        };
        let mut work = None;
        if r.target != rec.root_commit
            && let Ok(c) = self.show(tenant, &r.target).await
            && let Ok(bytes) = self.artifact_of(tenant, &c).await
        {
            work = Some(String::from_utf8_lossy(&bytes).into_owned());
        }
        ChainTip {
            id: Some(r.target),
            work,
        }
    }

    /// What a branch that did not return by itself hands its parent: its
    /// status, why, its usage, and its latest checkpoint (`tip`; scrubbed,
    /// left out if the scrubber fails).
    fn forced_text(&self, rec: &BranchRecord, tip: &ChainTip) -> String {
        let mut head = format!(
            "[branch {} {}: {}] {} ({} of {} budget tokens used; its chain stays at branches/{}",
            rec.id,
            rec.status,
            rec.reason.as_deref().unwrap_or("ended"),
            rec.description,
            rec.tokens_used,
            rec.budget,
            rec.id,
        );
        let mut body = String::new();
        if let Some(id) = tip.id {
            head.push_str(&format!(", tip {id}"));
        }
        if let Some(work) = &tip.work {
            let last: String = work.chars().take(2000).collect();
            body = format!("\nlatest checkpoint:\n{last}");
        }
        head.push(')');
        let f = self.branching().cloned();
        let full = format!("{head}{body}");
        match f.map(|f| f.scrubber.scrub(&full)) {
            Some(Ok(s)) => s.text,
            // Fail closed: without a scrub only the fixed part goes back.
            _ => format!(
                "[branch {} {}] (details withheld: the secret scrubber failed)",
                rec.id, rec.status
            ),
        }
    }

    /// Appends `text` to the chain of `rec`'s parent (its parent branch's,
    /// or its session's) as one `branch_return` delta commit, by
    /// compare-and-swap on the parent's ref.
    async fn append_to_parent(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
        text: String,
    ) -> Result<Commit> {
        let (name, session_of_commit) = match &rec.parent_branch {
            Some(p) => (branch_ref(p), p.to_string()),
            None => (session_ref(&rec.session_id)?, rec.session_id.clone()),
        };
        let session_of_commit: SessionId = session_of_commit.parse()?;
        let principal = branch_principal();
        let mut last = None;
        for _ in 0..APPEND_ATTEMPTS {
            let tip = self
                .stores()
                .meta
                .get_ref(tenant, &name)
                .await?
                .map(|r| r.target);
            // In the parent's own format when it holds messages (one user
            // message with the text), so its context stays native; raw
            // otherwise, or if that format refuses the message.
            let mut encodings = Vec::new();
            // Raw text is line-based: the entry starts on a line of its own
            // and ends its line, so the parent's next turn is not glued on.
            let mut starts_line = true;
            if let Some(t) = &tip {
                let parent = self.show(tenant, t).await?;
                let format = parent.format.clone();
                let codec = self.formats().codec(&format).clone();
                if !codec.structured() {
                    let last = self.artifact_of(tenant, &parent).await?;
                    starts_line = last.last().is_none_or(|&b| b == b'\n');
                }
                if codec.structured() {
                    let conv = crate::format::canonical::Conversation {
                        messages: vec![crate::format::canonical::Message::new(
                            crate::format::canonical::Role::User,
                            vec![crate::format::canonical::Block::text(text.clone())],
                        )],
                    };
                    if let Ok(enc) = codec.encode_canonical(&conv)
                        && enc.lost.is_empty()
                    {
                        encodings.push((format, enc.bytes));
                    }
                }
            }
            encodings.push((FormatId::raw(), raw_line(&text, starts_line)));
            let mut moved = false;
            for (i, (format, bytes)) in encodings.iter().enumerate() {
                let new = NewCommit {
                    parent: tip,
                    session_id: Some(session_of_commit.clone()),
                    checkpoint: Trigger::BranchReturn,
                    summary: Some(format!("branch {} {}", rec.id, rec.status)),
                    created_at: Some(self.clock().now()),
                    tags: Some(Tags::from([
                        ("branch".to_owned(), rec.id.to_string()),
                        ("branch_status".to_owned(), rec.status.as_str().to_owned()),
                    ])),
                    ref_move: Some(RefMove {
                        name: name.clone(),
                        expected: tip,
                    }),
                    ..NewCommit::new(
                        principal.clone(),
                        "ctx-branch-return",
                        format.clone(),
                        bytes.clone(),
                    )
                };
                match self.record(tenant, new).await {
                    Ok((commit, _)) => {
                        if let Some(p) = &rec.parent_branch {
                            self.charge_tokens(tenant, p, commit.token_count).await?;
                        }
                        return Ok(commit);
                    }
                    Err(e) if e.kind == ErrorKind::Conflict => {
                        last = Some(e);
                        moved = true;
                        break;
                    }
                    Err(e) if e.kind == ErrorKind::Invalid && i + 1 < encodings.len() => {
                        tracing::warn!(format = %format, error = %e, "branch return falls back to raw");
                    }
                    Err(e) => return Err(e),
                }
            }
            if !moved {
                break;
            }
        }
        Err(last.unwrap_or_else(|| Error::unavailable("the parent's chain kept moving")))
    }
}

/// `text` as a raw entry of a line-based context: after a line break when
/// the parent's content does not end with one, and ending its own line.
fn raw_line(text: &str, starts_line: bool) -> bytes::Bytes {
    let mut out = String::with_capacity(text.len() + 2);
    if !starts_line {
        out.push('\n');
    }
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    out.into()
}

//! Reconcile: the Redis state of users compared with the truth in SQL and
//! rewritten, atomically per user, where it differs (every ten minutes or
//! so: the newest seq minus the read seq, from the store itself; drift
//! beyond a threshold is logged).
//!
//! Exact under concurrent writes: the users' state versions are read before
//! the truth, and a user whose version moved meanwhile is left alone and read
//! again, so a rewrite never undoes a touch or mark-read that the truth read
//! did not see. A reconcile reads again, a moment later, a user whose state
//! and truth differ at all: mostly a change on its way (a message, recall
//! or mention stored and not yet in Redis, or a large conversation's
//! message that came after the truth was read), which is no drift; its last
//! attempt rewrites.

use crate::bindings::unread::core::types::{Error, Principal, ReconcileReport, UserScope};
use crate::config::{self, Limits};
use crate::redis;
use crate::scripts::{ForgetLoaded, Heads, MoveClocks, Rebuild, Rebuilt, TruthUser, Versions};
use crate::sql::{self, Truth, TruthRow};

/// Users per Redis script and SQL query.
const CHUNK: usize = 100;
/// Users per call of a walk.
pub const WALK_BATCH: u32 = 200;
/// Reads of the truth for users whose state keeps moving.
const ATTEMPTS: usize = 3;
/// A reconcile's wait before reading a user again for what may be a
/// change on its way: the app's touch follows its store within
/// milliseconds.
const AGAIN_AFTER: std::time::Duration = std::time::Duration::from_millis(50);

/// Checks the users of `scope`.
pub async fn run(url: &str, tenant: &str, scope: UserScope) -> Result<ReconcileReport, Error> {
    let (users, next_cursor, walk) = match scope {
        UserScope::Users(users) => (users, None, false),
        UserScope::Walk(after) => {
            let (users, next) = walk_members(url, tenant, after).await?;
            (users, next, true)
        }
    };
    let limits = Limits::read().await?;
    let threshold = u64::from(config::drift_alert_threshold().await?);
    let mut report = ReconcileReport { checked: 0, drifted: 0, fixed: 0, max_drift: 0, next_cursor };
    for chunk in users.chunks(CHUNK) {
        for rebuilt in check_users(url, tenant, chunk, limits, true).await? {
            report.checked += 1;
            report.drifted += u32::from(rebuilt.drifted);
            report.fixed += u32::from(rebuilt.drifted && rebuilt.done);
            report.max_drift = report.max_drift.max(rebuilt.max_drift);
            warn(tenant, &rebuilt, threshold);
        }
    }
    if walk && report.next_cursor.is_none() {
        // A whole pass is done: what no member can count any more goes.
        sql::prune_marks(url, tenant).await?;
    }
    Ok(report)
}

/// The next batch of users with a membership, after `after`, and where the
/// walk goes on (none when it is complete).
pub async fn walk_members(
    url: &str,
    tenant: &str,
    after: Option<String>,
) -> Result<(Vec<String>, Option<String>), Error> {
    let users = sql::members_after(url, tenant, after.as_deref().unwrap_or(""), WALK_BATCH).await?;
    let next = (users.len() == WALK_BATCH as usize).then(|| users.last().cloned()).flatten();
    Ok((users, next))
}

/// Versions, then truth, then the guarded rewrite; again for users that moved.
pub async fn check(url: &str, tenant: &str, users: &[String], limits: Limits) -> Result<Vec<Rebuilt>, Error> {
    let mut rebuilt = Vec::new();
    // A truth read and a rewrite per chunk, as a reconcile does: a recall
    // with a SQL store may name every member of a big conversation.
    for chunk in users.chunks(CHUNK) {
        rebuilt.extend(check_users(url, tenant, chunk, limits, false).await?);
    }
    // A user whose state moved through every attempt (a busy user) still
    // holds what it held before the change the caller wrote to the truth:
    // no longer loaded, the user is rebuilt by their next call instead.
    let unsettled: Vec<(String, String)> =
        rebuilt.iter().filter(|r| !r.done).map(|r| (tenant.to_string(), r.user.clone())).collect();
    if !unsettled.is_empty() {
        redis::run(&ForgetLoaded { users: &unsettled }).await?;
    }
    Ok(rebuilt)
}

/// Makes one user's Redis state the truth's again, after the user's own
/// call found it behind the truth: another call moved the truth past what
/// this one wrote to Redis and may have reached Redis first, or Redis
/// answered a setting without the conversation or with a pin too many where
/// the truth allowed it, or missed it (the user not loaded, or the
/// conversation beyond what Redis keeps). [`check`] (a rewrite guarded by
/// the state's version, which every setting call and mark-read with a SQL
/// store moves in its Redis step, after its truth's), or the user unloaded;
/// whether it settled. If it could not, whichever store failed, the user's next read
/// rebuilds from the truth: unloaded now, or marked stale for Redis's next
/// connection.
pub async fn settle_user(url: &str, who: &Principal, limits: Limits) -> bool {
    let Err(error) = check(url, &who.tenant, std::slice::from_ref(&who.user), limits).await else {
        return true;
    };
    eprintln!("unread: warning: tenant={}: a user's Redis state could not be settled: {error:?}", who.tenant);
    let _ = redis::run(&ForgetLoaded { users: &[(who.tenant.clone(), who.user.clone())] }).await;
    let _ = sql::mark_stale(url, &who.tenant, &who.user).await;
    false
}

/// [`check`]; `for_drift` (a reconcile): a user whose state and truth differ
/// is read again too, a moment later.
async fn check_users(
    url: &str,
    tenant: &str,
    users: &[String],
    limits: Limits,
    for_drift: bool,
) -> Result<Vec<Rebuilt>, Error> {
    let mut pending: Vec<String> = users.to_vec();
    let mut done = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let versions = redis::run(&Versions { tenant, users: &pending }).await?;
        let truth = sql::truth(url, tenant, &pending, limits).await?;
        let users: Vec<(String, String)> = pending.iter().cloned().zip(versions).collect();
        let mut moved = Vec::new();
        let reader = match for_drift {
            true => Reader::Reconcile { last: attempt == ATTEMPTS },
            false => Reader::Caller,
        };
        for rebuilt in rebuild(tenant, &users, &truth, reader, limits).await? {
            if rebuilt.done || attempt == ATTEMPTS {
                done.push(rebuilt);
            } else {
                moved.push(rebuilt.user);
            }
        }
        if moved.is_empty() {
            break;
        }
        if for_drift {
            spin_sdk::time::sleep(AGAIN_AFTER).await;
        }
        pending = moved;
    }
    Ok(done)
}

/// Heads per script when a rebuild writes the truth's last messages.
const HEADS_CHUNK: usize = 500;

/// Who read the truth a rebuild writes, which decides how it treats users.
#[derive(Clone, Copy)]
pub enum Reader {
    /// The user's own list, badge or mark-read, which Redis missed: loaded
    /// even with an empty truth ([`Rebuild::load_empty`]), from the one read
    /// it made ([`Rebuild::settle`]).
    TheUser,
    /// A call that named other users (a touch, a leave), or a setting call
    /// settling its own user ([`settle_user`]): it rewrites what differs
    /// now.
    Caller,
    /// A reconcile, on attempt `last` or an earlier one of its reads of
    /// the truth: before the last, what may be a change on its way waits.
    Reconcile { last: bool },
}

/// Rewrites each (user, expected version) from `truth` where it differs.
/// The conversations' heads take the truth's last messages first, so a row
/// is never listed before its preview is there.
pub async fn rebuild(
    tenant: &str,
    users: &[(String, String)],
    truth: &Truth,
    reader: Reader,
    limits: Limits,
) -> Result<Vec<Rebuilt>, Error> {
    let mut heads: Vec<&TruthRow> = truth.rows.iter().filter(|row| row.last_seq > 0).collect();
    // One head per conversation, the newest message the truth gave for it.
    heads.sort_unstable_by(|a, b| a.conversation.cmp(&b.conversation).then(b.last_seq.cmp(&a.last_seq)));
    heads.dedup_by(|next, kept| next.conversation == kept.conversation);
    for chunk in heads.chunks(HEADS_CHUNK) {
        let (_, logs) = redis::run(&Heads { tenant, heads: chunk.to_vec() }).await?;
        MoveClocks::after(tenant, &logs).await?;
    }
    let mut by_user = truth.rows_by_user();
    let users = users
        .iter()
        .map(|(user, version)| TruthUser {
            user,
            version,
            partial: truth.partial.contains(user),
            rows: by_user.remove(user.as_str()).unwrap_or_default(),
        })
        .collect();
    let load_empty = matches!(reader, Reader::TheUser);
    let settle = !matches!(reader, Reader::Reconcile { last: false });
    redis::run(&Rebuild { tenant, users, load_empty, settle, limits }).await
}

/// One warning line per conversation whose drift is above the threshold.
fn warn(tenant: &str, rebuilt: &Rebuilt, threshold: u64) {
    if !rebuilt.done {
        eprintln!("unread: warning: reconcile skipped tenant={tenant} user={}: its state kept changing", rebuilt.user);
    }
    for (what, in_redis, in_truth) in &rebuilt.drifts {
        if in_redis.abs_diff(*in_truth) > threshold {
            eprintln!(
                "unread: warning: drift tenant={tenant} user={} conversation={what} redis={in_redis} truth={in_truth}",
                rebuilt.user
            );
        }
    }
}

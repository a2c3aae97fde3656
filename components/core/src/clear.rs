//! Clearing one category (system, trade and interaction notifications have
//! a lifecycle of their own, and a clear must never touch another
//! category). A dry run reports exactly what the clear would do and writes
//! nothing, so an operator can try a clear first.
//!
//! Per batch of users: with a SQL store they are reconciled first (so Redis
//! holds their truth), then the category's inventory is read (with the
//! conversations only the store holds, of a user in more than Redis keeps),
//! the read cursors are written to SQL, and the clear script marks read up
//! to the inventoried seqs — never past them, so a message arriving
//! meanwhile stays unread. A user Redis no longer holds as loaded by then
//! is left to the truth, which their next call rebuilds them from. Redis's
//! inventory, not the truth's, says what Redis clears: a message the truth
//! has and Redis not yet stays out of both.

use crate::bindings::unread::core::types::{ClearReport, Error, UserScope};
use crate::config::Limits;
use crate::scripts::{CategoryInventory, ClearCategory, Clearing, Inventory, Members};
use crate::{reconcile, redis, sql};

/// Users per Redis script.
const CHUNK: usize = 100;

/// Clears (or, with `dry_run`, inventories) `category` for the users of `scope`.
pub async fn run(
    store: Option<String>,
    tenant: &str,
    scope: UserScope,
    category: &str,
    dry_run: bool,
) -> Result<ClearReport, Error> {
    let (mut users, next_cursor) = match scope {
        UserScope::Users(users) => (users, None),
        UserScope::Walk(after) => walk(store.as_deref(), tenant, after).await?,
    };
    users.sort();
    users.dedup();
    let limits = Limits::read().await?;
    let mut report = ClearReport { users: 0, conversations: 0, unread: 0, next_cursor };
    for chunk in users.chunks(CHUNK) {
        let inventory = match &store {
            // A dry run writes nothing, not even a repair: it reads what the
            // inventory script would find once the users were reconciled.
            Some(url) if dry_run => to_clear(chunk, &sql::truth(url, tenant, chunk, limits).await?.rows, category),
            _ => {
                if let Some(url) = &store {
                    reconcile::check(url, tenant, chunk, limits).await?;
                }
                let members = Members { tenant, users: chunk };
                let require_loaded = store.is_some();
                redis::run(&CategoryInventory { category, members, limits, require_loaded }).await?
            }
        };
        // A user in more conversations than `max_conversations + max_kept`
        // has some that neither Redis nor the truth's rows hold: only the
        // store has them, and a clear must not leave them behind, to come
        // back with their backlog at their next message. (One that a message
        // brings into the rows between the two reads is in neither, and
        // keeps its backlog in both until the next clear.)
        let inventory = match &store {
            Some(url) => {
                let beyond = sql::all_beyond_the_rows(url, tenant, chunk, limits).await?;
                with_the_rest(inventory, to_clear(chunk, &beyond, category))
            }
            None => inventory,
        };
        let inventory: Inventory = inventory.into_iter().filter(|(_, rows)| !rows.is_empty()).collect();
        report.users += inventory.len() as u32;
        report.conversations += inventory.iter().map(|(_, rows)| rows.len() as u32).sum::<u32>();
        report.unread += inventory.iter().flat_map(|(_, rows)| rows.iter().map(|r| r.2)).sum::<u64>();
        if !dry_run && !inventory.is_empty() {
            clear(store.as_deref(), tenant, category, &inventory, limits).await?;
        }
    }
    Ok(report)
}

/// Each user's rows of `category` with something to clear.
fn to_clear(users: &[String], rows: &[sql::TruthRow], category: &str) -> Inventory {
    let inventory = users.iter().map(|user| {
        let rows = rows
            .iter()
            .filter(|r| &r.user == user && r.category == category && (r.read_seq < r.last_seq || r.marked_unread))
            .map(|r| (r.conversation.clone(), r.last_seq, r.counts().counted().unread))
            .collect();
        (user.clone(), rows)
    });
    inventory.collect()
}

/// The inventory with each user's `rest` added, but for a conversation it
/// already holds (Redis's cursor and seq for it are the ones a clear takes).
fn with_the_rest(mut inventory: Inventory, rest: Inventory) -> Inventory {
    for (user, rows) in rest {
        let index = match inventory.iter().position(|(u, _)| *u == user) {
            Some(index) => index,
            None => {
                inventory.push((user, Vec::new()));
                inventory.len() - 1
            }
        };
        let held = &mut inventory[index].1;
        let fresh: Vec<_> = rows.into_iter().filter(|(c, _, _)| held.iter().all(|(h, _, _)| h != c)).collect();
        held.extend(fresh);
    }
    inventory
}

/// Writes the cursors to SQL first (the truth), then clears Redis.
async fn clear(
    store: Option<&str>,
    tenant: &str,
    category: &str,
    inventory: &Inventory,
    limits: Limits,
) -> Result<(), Error> {
    if let Some(url) = store {
        let cursors: Vec<(String, String, u64)> = inventory
            .iter()
            .flat_map(|(user, rows)| {
                rows.iter().map(move |(conversation, seq, _)| (user.clone(), conversation.clone(), *seq))
            })
            .collect();
        sql::advance_cursors(url, tenant, &cursors).await?;
    }
    let clearings = inventory
        .iter()
        .flat_map(|(user, rows)| {
            rows.iter().map(move |(conversation, seq, _)| Clearing { user, conversation, seq: *seq })
        })
        .collect();
    redis::run(&ClearCategory {
        tenant,
        category,
        max_conversations: limits.max_conversations,
        max_kept: limits.max_kept,
        require_loaded: store.is_some(),
        clearings,
    })
    .await
    .map(drop)
}

/// The next batch of users: the SQL store's members, or without one the
/// users Redis holds state for (the cursor is Redis's SCAN cursor).
async fn walk(
    store: Option<&str>,
    tenant: &str,
    after: Option<String>,
) -> Result<(Vec<String>, Option<String>), Error> {
    if let Some(url) = store {
        return reconcile::walk_members(url, tenant, after).await;
    }
    let cursor = after.unwrap_or_else(|| "0".into());
    let (next, users) = redis::walk_users(tenant, &cursor, reconcile::WALK_BATCH).await?;
    Ok((users, Some(next).filter(|c| c != "0")))
}

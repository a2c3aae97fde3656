//! Clearing one category (seed 003: system, trade and interaction
//! notifications have their own lifecycle; seed 000's second pit: a clear
//! must never touch another category). A dry run reports exactly what the
//! clear would do and writes nothing (seed 000's shadow run).
//!
//! Per batch of users: with a SQL store they are reconciled first (so Redis
//! holds their truth), then the category's inventory is read, the read
//! cursors are written to SQL, and the clear script marks read up to the
//! inventoried seqs — never past them, so a message arriving meanwhile
//! stays unread.

use crate::bindings::unread::core::types::{ClearReport, Error, UserScope};
use crate::scripts::Script;
use crate::{config, reconcile, redis, reply, sql};

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
    let mut report = ClearReport { users: 0, conversations: 0, unread: 0, next_cursor };
    for chunk in users.chunks(CHUNK) {
        if let Some(url) = &store {
            reconcile::check(url, tenant, chunk, config::max_conversations().await?).await?;
        }
        let mut args = vec![tenant.to_string(), category.to_string()];
        args.extend(chunk.iter().cloned());
        let inventory = reply::inventory(redis::eval(Script::CategoryInventory, args).await?)?;
        let inventory: reply::Inventory = inventory.into_iter().filter(|(_, rows)| !rows.is_empty()).collect();
        report.users += inventory.len() as u32;
        report.conversations += inventory.iter().map(|(_, rows)| rows.len() as u32).sum::<u32>();
        report.unread += inventory.iter().flat_map(|(_, rows)| rows.iter().map(|r| r.2)).sum::<u64>();
        if !dry_run && !inventory.is_empty() {
            clear(store.as_deref(), tenant, category, inventory).await?;
        }
    }
    Ok(report)
}

/// Writes the cursors to SQL first (the truth), then clears Redis.
async fn clear(store: Option<&str>, tenant: &str, category: &str, inventory: reply::Inventory) -> Result<(), Error> {
    if let Some(url) = store {
        let cursors: Vec<(String, String, u64)> = inventory
            .iter()
            .flat_map(|(user, rows)| {
                rows.iter().map(move |(conversation, seq, _)| (user.clone(), conversation.clone(), *seq))
            })
            .collect();
        sql::advance_cursors(url, tenant, &cursors).await?;
    }
    let mut args = vec![tenant.to_string(), category.to_string()];
    for (user, rows) in inventory {
        args.extend([user, rows.len().to_string()]);
        for (conversation, seq, _) in rows {
            args.extend([conversation, seq.to_string()]);
        }
    }
    redis::eval(Script::ClearCategory, args).await.map(drop)
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
    if cursor.is_empty() || !cursor.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Invalid("cursor is not one this service issued".into()));
    }
    let args = vec![tenant.to_string(), cursor, reconcile::WALK_BATCH.to_string()];
    let mut found = reply::texts(redis::eval(Script::WalkUsers, args).await?)?.into_iter();
    let next = found.next().filter(|c| c != "0");
    Ok((found.collect(), next))
}

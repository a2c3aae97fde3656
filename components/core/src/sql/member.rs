//! A user's own writes (mark-read, mute, pin, mark unread) go only where the
//! app's memberships view has the user in the conversation, so that no
//! caller can grow unread's tables with conversations they do not have.
//!
//! MySQL compares through the view's collation; the casts to binary keep a
//! match exact while the plain comparisons let the view's index serve it.

use super::{
    MarkUnread, Param, Store, Value, cursor_alias, cursor_column, cursor_returning, cursor_upsert, exactly, malformed,
    query_built, returning, text,
};
use crate::Error;

/// Whether a user may change one of their settings of a conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permit {
    /// The user is a member: the write may go ahead.
    Member,
    /// The memberships view does not have the user in the conversation.
    NotMember,
    /// Pinning it would pass the pin limit.
    TooManyPins,
}

/// Moves a member's read cursor forward (never back, never more than
/// `ahead` past the conversation's last message) in one statement, and
/// answers the cursor the store holds then; `None` when the user is not a
/// member, and then nothing is written.
pub async fn read_as_member(
    url: &str,
    tenant: &str,
    user: &str,
    conversation: &str,
    seq: u64,
    ahead: u64,
) -> Result<Option<u64>, Error> {
    let now = crate::now_ms() as i64;
    let rows = query_built(url, |store| {
        let values = [text(tenant), text(user), text(conversation), Param::Int(seq as i64), Param::Int(ahead as i64)];
        read_statement(store, &values, now)
    })
    .await?;
    if rows.is_empty() && !returning(url).await? {
        // MySQL answers no rows to an upsert: it wrote one if the user is a member.
        if permit(url, tenant, user, conversation, None, false).await? != Permit::Member {
            return Ok(None);
        }
        return cursor_column(url, tenant, user, conversation, "read_seq").await?.map(|row| cursor(&row)).transpose();
    }
    rows.first().map(|row| cursor(row)).transpose()
}

/// The read cursor of a row that answered `read_seq`.
fn cursor(row: &[Value]) -> Result<u64, Error> {
    match row {
        [Value::Int(seq)] => u64::try_from(*seq).map_err(|_| malformed("read_seq")),
        _ => Err(malformed("read_seq")),
    }
}

/// The upsert of [`read_as_member`], with its parameters in the order its
/// placeholders occur. MySQL without `RETURNING` asks whether the row is
/// there after the upsert (the upsert wrote nothing for a non-member).
fn read_statement(store: &Store, values: &[Param; 5], now: i64) -> (String, Vec<Param>) {
    let [tenant, user, conversation, seq, ahead] = values.clone();
    let mut params = Vec::new();
    let mut p = |param: &Param| {
        params.push(param.clone());
        store.placeholder(params.len())
    };
    let select = format!(
        "SELECT {t}, {u}, {c}, LEAST({seq}, COALESCE((SELECT MAX(h.last_seq) FROM unread_conversation_heads h \
           WHERE h.tenant = {t2} AND h.conversation = {c2}{exact}), 0) + {ahead}), {now} \
         FROM unread_memberships m WHERE {member}",
        t = p(&tenant),
        u = p(&user),
        c = p(&conversation),
        seq = p(&seq),
        t2 = p(&tenant),
        c2 = p(&conversation),
        exact = exactly(store, &mut |param| p(&param), [("h.tenant", &tenant), ("h.conversation", &conversation)]),
        ahead = p(&ahead),
        now = p(&Param::Int(now)),
        member = membership(store, &mut p, [&tenant, &user, &conversation]),
    );
    let returned = cursor_returning(store, "read_seq");
    let statement = format!(
        "INSERT INTO unread_read_cursors{} (tenant, user_id, conversation, read_seq, updated_at) {select} LIMIT 1 {}{returned}",
        cursor_alias(store),
        cursor_upsert(store, MarkUnread::Clears)
    );
    (statement, params)
}

/// The condition that the memberships row `m` is (tenant, user, conversation).
fn membership(
    store: &Store,
    p: &mut impl FnMut(&Param) -> String,
    [tenant, user, conversation]: [&Param; 3],
) -> String {
    let plain =
        format!("m.tenant = {} AND m.user_id = {} AND m.conversation = {}", p(tenant), p(user), p(conversation));
    match store {
        Store::Mysql(_) => format!(
            "{plain} AND CAST(m.tenant AS BINARY) = {} AND CAST(m.user_id AS BINARY) = {} \
             AND CAST(m.conversation AS BINARY) = {}",
            p(tenant),
            p(user),
            p(conversation)
        ),
        Store::Postgres(_) => plain,
    }
}

/// Whether `user` may set a setting of `conversation`: a member of a
/// conversation with a message, and for a pin (`pins_allowed`), with fewer
/// than that many other member conversations pinned. One query; nothing is
/// written.
pub async fn setting_permit(
    url: &str,
    tenant: &str,
    user: &str,
    conversation: &str,
    pins_allowed: Option<u32>,
) -> Result<Permit, Error> {
    permit(url, tenant, user, conversation, pins_allowed, true).await
}

/// See [`setting_permit`]; `with_message`: the conversation must have one.
async fn permit(
    url: &str,
    tenant: &str,
    user: &str,
    conversation: &str,
    pins_allowed: Option<u32>,
    with_message: bool,
) -> Result<Permit, Error> {
    let rows = query_built(url, |store| {
        let (tenant, user, conversation) = (text(tenant), text(user), text(conversation));
        let mut params = Vec::new();
        let mut p = |param: &Param| {
            params.push(param.clone());
            store.placeholder(params.len())
        };
        let member = membership(store, &mut p, [&tenant, &user, &conversation]);
        let head = if with_message {
            let (t, c) = (p(&tenant), p(&conversation));
            let exact =
                exactly(store, &mut |param| p(&param), [("h.tenant", &tenant), ("h.conversation", &conversation)]);
            format!(
                "EXISTS (SELECT 1 FROM unread_conversation_heads h WHERE h.tenant = {t} AND h.conversation = {c} \
                   AND h.last_seq > 0{exact})"
            )
        } else {
            "1 = 1".to_string()
        };
        let statement = format!(
            "SELECT (SELECT COUNT(*) FROM unread_memberships m WHERE {member} AND {head}) AS member, \
               (SELECT COUNT(*) FROM unread_read_cursors r WHERE r.tenant = {t} AND r.user_id = {u} \
                  AND r.pinned = 1 AND r.conversation <> {c} AND EXISTS (SELECT 1 FROM unread_memberships m \
                    WHERE m.tenant = r.tenant AND m.user_id = r.user_id AND m.conversation = r.conversation)) AS pins",
            t = p(&tenant),
            u = p(&user),
            c = p(&conversation),
        );
        (statement, params)
    })
    .await?;
    let counts = rows.first().map(|row| row.as_slice());
    let (member, pins) = match counts {
        Some([Value::Int(member), Value::Int(pins)]) => (*member, *pins),
        _ => return Err(malformed("membership")),
    };
    Ok(match pins_allowed {
        _ if member == 0 => Permit::NotMember,
        Some(allowed) if pins >= i64::from(allowed) => Permit::TooManyPins,
        _ => Permit::Member,
    })
}

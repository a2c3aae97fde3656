//! The unread core: implements the `unread:core/counts` contract.
//!
//! Each call is one atomic Lua script (see [`script`] for the typed seam and
//! [`scripts`] for one definition per script), sent on the instance's Redis
//! connection ([`redis`]); [`keys`] alone names the keys. With a SQL store
//! configured (`sql_url`), every write goes there first, and answers come
//! from it when Redis cannot give them ([`degraded`]); [`reconcile`]
//! corrects Redis from it.

mod cached;
mod clear;
mod cluster;
mod config;
mod dataset;
mod degraded;
mod flags;
mod keys;
mod reconcile;
mod redis;
mod script;
mod scripts;
mod sql;
mod state;

use bindings::exports::unread::core::counts::Guest;
use bindings::unread::core::types::{
    AppBadge, ClearReport, ConversationFlag, ConversationState, Error, HealthReport, Message, Page, Principal,
    Reachability, ReadState, ReconcileReport, UserScope,
};
use config::Limits;
use reconcile::Reader;
use scripts::{
    Adopt, Badge, ClockMove, ForgetJoiners, ForgetUnannounced, GroupLogs, Join, Leave, List, ListCursor, Loaded,
    MarkRead, Members, MoveClocks, Previews, Recall, Recalled, RecordJoiners, Role, Touch, TouchMode, Touched,
    WantedLog,
};

// wit-bindgen's generated export glue is the only unsafe code here.
#[allow(unsafe_code)]
mod bindings {
    spin_sdk::wit_bindgen::generate!({
        runtime_path: "::spin_sdk::wit_bindgen::rt",
        path: "../../wit",
        world: "core",
        generate_all,
    });
}

/// Highest seq or score that survives Lua's double arithmetic exactly.
const MAX_EXACT: u64 = (1 << 53) - 1;

/// How far past the last message a read cursor may go: a client acking
/// messages the service has not heard of yet is normal; one sending a
/// timestamp as a seq must not silence the conversation for good.
const READ_AHEAD: u64 = 10_000;

/// Members one script call writes at most, as a service call names at most.
const MEMBERS_PER_CALL: usize = 500;

/// How long (seconds) a user that holds no listed conversation keeps its
/// other keys (kept cursors, marks, meta): 30 days.
const IDLE_TTL: u64 = 30 * 24 * 3600;

/// How long (seconds) a conversation's head (its last message's preview)
/// lives past its last message or the last list that showed it: 90 days.
/// A head is only needed while someone lists the conversation.
const HEAD_TTL: u64 = 90 * 24 * 3600;

/// How long the health check waits for each of Redis and the SQL store: a
/// Kubernetes probe gives up after a second by default, and the two are
/// checked at the same time.
const HEALTH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

struct Core;

impl Guest for Core {
    async fn touch(message: Message) -> Result<bool, Error> {
        check_exact(message.seq, "seq")?;
        check_exact(message.ts.saturating_mul(1000).saturating_add(999), "ts")?;
        let limits = Limits::read().await?;
        let store = sql::configured().await?;
        let threshold = config::large_group_threshold().await?;
        let mut members = roles(&message);
        let mut large_in_truth = false;
        // The memberships view has the conversation in the message's category.
        let mut vouched = false;
        let mut sender_marked = None;
        if let Some(url) = &store {
            let users: Vec<String> = members.iter().map(|(user, _)| user.clone()).collect();
            let audience = sql::audience(url, &message.tenant, &message.conversation, &users).await?;
            vouched = audience.category.is_some();
            if let Some(category) = audience.category.filter(|c| *c != message.category) {
                return Err(category_conflict("in the message store", &category));
            }
            sender_marked = record_in_truth(url, &message).await?;
            members.retain(|(user, _)| audience.members.contains(user));
            large_in_truth = audience.large;
            // The truth learns first that the conversation is large, so that
            // it stays large through a Redis that loses its data.
            if !large_in_truth && threshold > 0 && members.len() > threshold as usize {
                sql::record_large(url, &message.tenant, &message.conversation).await?;
                large_in_truth = true;
            }
        }
        let mut touch = Touch {
            tenant: &message.tenant,
            conversation: &message.conversation,
            seq: message.seq,
            score: state::score(message.ts, message.seq),
            category: &message.category,
            preview: &message.preview,
            mention_all: message.mention_all,
            max_conversations: limits.max_conversations,
            max_kept: limits.max_kept,
            require_loaded: store.is_some(),
            members: Vec::new(),
            mode: TouchMode::All,
            large_threshold: threshold,
            named: u32::try_from(members.len()).unwrap_or(u32::MAX),
            large: None,
            late: None,
            large_in_truth,
            category_in_truth: vouched,
            sender_marked,
        };
        // Whether Redis took the sender's mark-unread from the truth: read
        // back right after Redis's step, whatever fails after it (a touch
        // sent again would leave the mark alone).
        let mut sender_mark_moved = false;
        let touched = if redis::is_cluster().await? {
            touch_in_rounds(&mut touch, members, &mut sender_mark_moved).await
        } else {
            touch.members = members;
            let touched = redis::run(&touch).await;
            sender_mark_moved = matches!(touched, Ok(Touched::Done { sender_mark_moved: true, .. }));
            touched
        };
        if let (Some(url), Some(marked), true) = (&store, sender_marked, sender_mark_moved) {
            sender_mark_read_back(url, &message, marked, limits).await;
        }
        match touched? {
            Touched::Conflict { user, category } => Err(touched_conflict(user, &category)),
            Touched::Unvouched => Err(script::malformed()),
            Touched::Done { applied, mut unanswered, joiners, .. } => {
                // Who joined before the message that made the conversation
                // large, and whom it does not name, joins its log too: from
                // the truth with a SQL store, else by their state in Redis.
                // Then they are forgotten as joiners; until then every
                // message hands them over again (joining twice is joining).
                let named: std::collections::HashSet<String> = match joiners.is_empty() {
                    true => Default::default(),
                    false => roles(&message).into_iter().map(|(user, _)| user).collect(),
                };
                let adopted: Vec<String> = joiners.iter().filter(|user| !named.contains(*user)).cloned().collect();
                if store.is_some() {
                    unanswered.extend(adopted);
                } else if !adopted.is_empty() {
                    let members = Members { tenant: &message.tenant, users: &adopted };
                    redis::run(&Adopt { conversation: &message.conversation, members }).await?;
                }
                answer_from_truth(&store, &message.tenant, &unanswered, limits).await?;
                if !joiners.is_empty() {
                    let (tenant, conversation) = (&message.tenant, &message.conversation);
                    redis::run(&ForgetJoiners { tenant, conversation, users: &joiners }).await?;
                }
                Ok(applied)
            }
        }
    }

    async fn mark_read(who: Principal, conversation: String, seq: u64) -> Result<ReadState, Error> {
        check_exact(seq, "seq")?;
        let limits = Limits::read().await?;
        let store = sql::configured().await?;
        let (mut seq, mut ahead) = (seq, READ_AHEAD);
        if let Some(url) = &store {
            match sql::read_as_member(url, &who.tenant, &who.user, &conversation, seq, READ_AHEAD).await? {
                None => return Err(unknown_conversation(&conversation)),
                // The store bounded the cursor by its own last message, which
                // Redis may not have been touched with yet: Redis takes the
                // store's cursor as it is, so that both keep the same one.
                Some(cursor) => (seq, ahead) = (cursor, MAX_EXACT),
            }
        }
        let read = MarkRead {
            tenant: &who.tenant,
            user: &who.user,
            conversation: &conversation,
            seq,
            ahead,
            max_conversations: limits.max_conversations,
            max_kept: limits.max_kept,
            require_loaded: store.is_some(),
        };
        let mut unmarked = false;
        let answer = redis::run(&read).await.and_then(|loaded| match loaded {
            Loaded::Ready(None) => Err(unknown_conversation(&conversation)),
            Loaded::Ready(Some((state, took_mark))) => {
                unmarked = took_mark;
                Ok(Loaded::Ready(state))
            }
            Loaded::Miss(version) => Ok(Loaded::Miss(version)),
        });
        let (whom, id) = (&who, conversation.as_str());
        let state = or_from_truth(answer, &store, &who, true, |url, version| async move {
            degraded::read_state(&url, whom, id, seq, version).await
        })
        .await?;
        // The read took a mark-unread away in Redis: a mark-unread the truth
        // took after this read cleared it there may have reached Redis first.
        match (&store, unmarked) {
            (Some(url), true) => {
                let marked = sql::setting(url, &who.tenant, &who.user, &conversation, sql::Setting::MarkedUnread);
                unless_overtaken(url, &who, limits, state, async { Ok(marked.await? == Some(true)) }, || {
                    degraded::read_state_settled(url, whom, id, seq)
                })
                .await
            }
            _ => Ok(state),
        }
    }

    async fn list(who: Principal, limit: u32, cursor: Option<String>, category: Option<String>) -> Result<Page, Error> {
        let after = cursor.as_deref().map(ListCursor::parse).transpose()?;
        let store = sql::configured().await?;
        let list = List {
            tenant: &who.tenant,
            user: &who.user,
            limit,
            after: after.as_ref(),
            category: category.as_deref(),
            require_loaded: store.is_some(),
            limits: Limits::read().await?,
        };
        let answer = match redis::run(&list).await {
            // On Redis Cluster, a second round: the page's previews, from
            // their heads' slots.
            Ok(Loaded::Ready(mut page)) => {
                Previews::fill(&who.tenant, &mut page.conversations).await.map(|()| Loaded::Ready(page))
            }
            other => other,
        };
        let (whom, after, category) = (&who, after.as_ref(), category.as_deref());
        or_from_truth(answer, &store, &who, false, |url, version| async move {
            degraded::page(&url, whom, limit, after, category, version).await
        })
        .await
    }

    async fn set_flag(
        who: Principal,
        conversation: String,
        flag: ConversationFlag,
    ) -> Result<ConversationState, Error> {
        flags::set(sql::configured().await?, who, conversation, flag).await
    }

    async fn recall(
        tenant: String,
        conversation: String,
        seq: u64,
        members: Vec<String>,
        preview: Option<String>,
    ) -> Result<u32, Error> {
        check_exact(seq, "seq")?;
        let limits = Limits::read().await?;
        let store = sql::configured().await?;
        if let Some(url) = &store {
            sql::record_recall(url, &tenant, &conversation, seq).await?;
        }
        let named = once_each(members, None);
        let users = match &store {
            Some(url) => recall_audience(url, &tenant, &conversation, named).await?,
            None => named,
        };
        let mut recalled = Recalled::default();
        // At least one call, so that the head and the log take the recall
        // even with no member to write.
        for users in users.chunks(MEMBERS_PER_CALL).chain(users.is_empty().then_some(&[][..])) {
            let recall = Recall {
                conversation: &conversation,
                seq,
                preview: preview.as_deref().unwrap_or_default(),
                max_conversations: limits.max_conversations,
                max_kept: limits.max_kept,
                require_loaded: store.is_some(),
                members: Members { tenant: &tenant, users },
            };
            let part = redis::run(&recall).await?;
            recalled.dropped = recalled.dropped.saturating_add(part.dropped);
            recalled.large = recalled.large.or(part.large);
            recalled.logged |= part.logged;
            recalled.unanswered.extend(part.unanswered);
        }
        let moved: Vec<ClockMove> = recalled
            .large
            .map(|counter| ClockMove {
                conversation: conversation.clone(),
                counter: Some(counter),
                fresh: false,
                announce: Some(seq),
                logged: recalled.logged,
                also: None,
            })
            .into_iter()
            .collect();
        MoveClocks::after(&tenant, &moved).await?;
        answer_from_truth(&store, &tenant, &recalled.unanswered, limits).await?;
        Ok(recalled.dropped)
    }

    async fn join(tenant: String, conversation: String, seq: u64, members: Vec<String>) -> Result<u32, Error> {
        check_exact(seq, "seq")?;
        let limits = Limits::read().await?;
        let store = sql::configured().await?;
        let users = once_each(members, None);
        if let Some(url) = &store {
            // The truth's membership comes from the app's view: a member it
            // does not have is skipped, nothing written for them (a join held
            // back past a leave, or sent before the app added them: the
            // truth has no membership to count them in, and a cursor there
            // would have Redis count the conversation from 0 for them).
            let members = sql::audience(url, &tenant, &conversation, &users).await?.members;
            let (users, strangers): (Vec<String>, Vec<String>) =
                users.into_iter().partition(|user| members.contains(user));
            if !strangers.is_empty() {
                eprintln!(
                    "unread: warning: join of tenant={tenant} skipped {} member(s) not in unread_memberships",
                    strangers.len()
                );
            }
            if users.is_empty() {
                return Ok(0);
            }
            let joining = RecordJoiners { tenant: &tenant, conversation: &conversation, users: &users };
            let cursors: Vec<(String, String, u64)> =
                users.iter().map(|m| (m.clone(), conversation.clone(), seq)).collect();
            sql::join_cursors(url, &tenant, &cursors).await?;
            // Recorded as joining, for a message that makes the
            // conversation large without naming them (see touch).
            redis::run(&joining).await?;
            // The truth lists the conversation for its new members at once (it
            // has its last message): so does Redis, rebuilt from it.
            let rebuilt = reconcile::check(url, &tenant, &users, limits).await?;
            return Ok(rebuilt.iter().filter(|r| r.drifted).count() as u32);
        }
        let joining = RecordJoiners { tenant: &tenant, conversation: &conversation, users: &users };
        // On a cluster, the members outside the head's slot take it from here.
        let head = match redis::is_cluster().await? {
            true => Some(redis::run(&joining).await?),
            false => None,
        };
        let join = Join {
            head: head.as_ref(),
            conversation: &conversation,
            seq,
            max_conversations: limits.max_conversations,
            max_kept: limits.max_kept,
            members: Members { tenant: &tenant, users: &users },
        };
        redis::run(&join).await
    }

    async fn leave(tenant: String, conversation: String, members: Vec<String>) -> Result<u32, Error> {
        let store = sql::configured().await?;
        let mut users = once_each(members, None);
        if let Some(url) = &store {
            // A leave held back, or sent again after a 503, that comes after
            // the member rejoined changes nothing: the truth has them in.
            let members = sql::audience(url, &tenant, &conversation, &users).await?.members;
            users.retain(|user| !members.contains(user));
            sql::forget_members(url, &tenant, &conversation, &users).await?;
        }
        leave(&store, &tenant, &conversation, &users).await
    }

    async fn clear_category(
        tenant: String,
        scope: UserScope,
        category: String,
        dry_run: bool,
    ) -> Result<ClearReport, Error> {
        clear::run(sql::configured().await?, &tenant, scope, &category, dry_run).await
    }

    async fn badge(who: Principal, category: Option<String>) -> Result<AppBadge, Error> {
        let badge = badges_of(&who.tenant, std::slice::from_ref(&who.user), Reader::TheUser)
            .await?
            .pop()
            .ok_or_else(script::malformed)?;
        Ok(match category {
            Some(only) => {
                scripts::badge_of(badge.categories.into_iter().filter(|c| c.category == only).collect(), badge.source)
            }
            None => badge,
        })
    }

    async fn badges(tenant: String, users: Vec<String>) -> Result<Vec<AppBadge>, Error> {
        // A service asked, not the users: one the truth has nothing for (a
        // push gateway's stale id) gets no keys.
        badges_of(&tenant, &users, Reader::Caller).await
    }

    async fn reconcile(tenant: String, scope: UserScope) -> Result<ReconcileReport, Error> {
        let url = sql::configured().await?.ok_or_else(no_sql_store)?;
        reconcile::run(&url, &tenant, scope).await
    }

    async fn delete_conversation(tenant: String, conversation: String, members: Vec<String>) -> Result<u32, Error> {
        let store = sql::configured().await?;
        let users = once_each(members, None);
        if let Some(url) = &store {
            sql::forget_conversation(url, &tenant, &conversation).await?;
        }
        let removed = leave(&store, &tenant, &conversation, &users).await?;
        redis::run(&scripts::ForgetHead { tenant: &tenant, conversation: &conversation }).await?;
        let gone = ClockMove {
            conversation: conversation.clone(),
            counter: None,
            fresh: false,
            announce: None,
            logged: false,
            also: None,
        };
        MoveClocks::after(&tenant, &[gone]).await?;
        Ok(removed)
    }

    async fn health() -> HealthReport {
        let redis = async { reachability(redis::ping().await) };
        let sql = async {
            match sql::configured().await {
                Ok(None) => Reachability::NotConfigured,
                Ok(Some(url)) => reachability(sql::ping(&url, HEALTH_DEADLINE).await),
                Err(error) => reachability(Err(error)),
            }
        };
        let (redis, sql) = both(redis, sql).await;
        HealthReport { redis, sql }
    }
}

// The export glue wit-bindgen generates (unsafe by nature) lives in its own module.
#[allow(unsafe_code)]
mod export {
    use super::{Core, bindings};
    bindings::export!(Core with_types_in bindings);
}

/// The badges of `users`, in their order, in one script call; with a SQL
/// store, a user Redis has not loaded (or every user, when Redis cannot be
/// reached) from the truth.
/// The users' badges; `reader` says who asked (a user with nothing is loaded
/// on their own read alone).
async fn badges_of(tenant: &str, users: &[String], reader: Reader) -> Result<Vec<AppBadge>, Error> {
    let store = sql::configured().await?;
    let badge =
        Badge { users: Members { tenant, users }, require_loaded: store.is_some(), limits: Limits::read().await? };
    // Users Redis cannot answer for come from one read of the truth.
    let (mut badges, from_truth): (Vec<Option<AppBadge>>, Vec<degraded::Missed>) =
        match (redis::run(&badge).await, &store) {
            (Ok(answers), _) if answers.len() != users.len() => return Err(script::malformed()),
            (Ok(answers), _) => {
                let mut missed = Vec::new();
                let badges = answers
                    .into_iter()
                    .zip(users)
                    .map(|(answer, user)| match answer {
                        Loaded::Ready(badge) => Some(badge),
                        Loaded::Miss(version) => {
                            missed.push((user.clone(), Some(version)));
                            None
                        }
                    })
                    .collect();
                (badges, missed)
            }
            (Err(Error::Unavailable(reason)), Some(_)) => {
                eprintln!("unread: warning: answering tenant={tenant} from SQL: {reason}");
                (vec![None; users.len()], users.iter().map(|user| (user.clone(), None)).collect())
            }
            (Err(error), _) => return Err(error),
        };
    if !from_truth.is_empty() {
        let Some(url) = &store else { return Err(script::malformed()) };
        let mut answered = degraded::badges_of_users(url, tenant, &from_truth, reader).await?.into_iter();
        for badge in badges.iter_mut().filter(|badge| badge.is_none()) {
            *badge = Some(answered.next().ok_or_else(script::malformed)?);
        }
    }
    badges.into_iter().map(|badge| badge.ok_or_else(script::malformed)).collect()
}

/// The members' state of a conversation goes (left, or deleted).
async fn leave(store: &Option<String>, tenant: &str, conversation: &str, users: &[String]) -> Result<u32, Error> {
    let limits = Limits::read().await?;
    // Forgotten as joiners first: else the message that makes the
    // conversation large would adopt one whose tombstone has gone (idle
    // keys expired, or evicted by newer ones) and give it back the
    // conversation. A retry after a 503 redoes both steps.
    redis::run(&ForgetJoiners { tenant, conversation, users }).await?;
    let leave = Leave {
        conversation,
        max_conversations: limits.max_conversations,
        max_kept: limits.max_kept,
        require_loaded: store.is_some(),
        members: Members { tenant, users },
    };
    let (removed, unanswered) = redis::run(&leave).await?;
    answer_from_truth(store, tenant, &unanswered, limits).await?;
    Ok(removed)
}

/// What a touch adds to the truth besides the message the app stored: the
/// sender's read cursor (else a reconcile would count the sender's own
/// message) and who the message mentions. Answers whether the truth holds
/// the sender's mark-unread after it, for Redis to take.
async fn record_in_truth(url: &str, message: &Message) -> Result<Option<bool>, Error> {
    let mut sender_marked = None;
    if let Some(sender) = &message.sender {
        sender_marked = Some(sql::sent(url, &message.tenant, sender, &message.conversation, message.seq).await?);
    }
    let mut mentioned = message.mentions.clone();
    if message.mention_all {
        mentioned.push("*".into());
    }
    let sender = message.sender.as_deref().unwrap_or_default();
    sql::record_mentions(url, &message.tenant, &message.conversation, message.seq, sender, &mentioned).await?;
    Ok(sender_marked)
}

/// After a touch changed the sender's mark-unread in Redis to `marked`, the
/// truth's when the touch recorded the message there: a mark-unread or a
/// mark-read of the sender's at once may have moved the truth's since and
/// reached Redis before the touch did. If so, the sender's Redis state is
/// made the truth's again. It runs whether or not the rest of the touch
/// succeeds; a failure here is logged (a reconcile finds the drift), not
/// answered.
async fn sender_mark_read_back(url: &str, message: &Message, marked: bool, limits: Limits) {
    let Some(sender) = &message.sender else { return };
    let who = Principal { tenant: message.tenant.clone(), user: sender.clone() };
    let held = sql::setting(url, &who.tenant, &who.user, &message.conversation, sql::Setting::MarkedUnread);
    let _ =
        unless_overtaken(url, &who, limits, (), async { Ok(held.await? != Some(marked)) }, || async { Ok(()) }).await;
}

/// Whom a recall reaches with a SQL store. The truth counts a recall for
/// every member of the conversation, so Redis does too, whoever the call
/// names; in a large conversation the recall is its log's, and of those
/// named it reaches the members alone. Nobody else gets a state.
async fn recall_audience(
    url: &str,
    tenant: &str,
    conversation: &str,
    named: Vec<String>,
) -> Result<Vec<String>, Error> {
    let audience = sql::audience(url, tenant, conversation, &named).await?;
    if audience.large {
        return Ok(named.into_iter().filter(|user| audience.members.contains(user)).collect());
    }
    sql::members_of(url, tenant, conversation).await
}

/// Every member once (the sender always is one), with their role.
fn roles(message: &Message) -> Vec<(String, Role)> {
    once_each(message.members.clone(), message.sender.clone())
        .into_iter()
        .map(|user| {
            let role = if message.sender.as_ref() == Some(&user) {
                Role::Sender
            } else if message.mentions.contains(&user) {
                Role::Mentioned
            } else {
                Role::Member
            };
            (user, role)
        })
        .collect()
}

/// Members a many-user script left to the SQL store: their Redis state is
/// rebuilt from the truth, which already holds the change.
async fn answer_from_truth(
    store: &Option<String>,
    tenant: &str,
    users: &[String],
    limits: Limits,
) -> Result<(), Error> {
    match store {
        Some(url) if !users.is_empty() => reconcile::check(url, tenant, users, limits).await.map(drop),
        _ => Ok(()),
    }
}

/// Redis's answer; with a SQL store, the truth's when Redis did not have the
/// user (`version`: rebuild it) or could not be reached. A write that reached
/// only SQL marks the user, so that Redis does not answer for them with
/// what it held before.
async fn or_from_truth<T, F, Fut>(
    answer: Result<Loaded<T>, Error>,
    store: &Option<String>,
    who: &Principal,
    wrote: bool,
    from_truth: F,
) -> Result<T, Error>
where
    F: FnOnce(String, Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    match (answer, store) {
        (Ok(Loaded::Ready(value)), _) => Ok(value),
        (Ok(Loaded::Miss(version)), Some(url)) => from_truth(url.clone(), Some(version)).await,
        (Err(Error::Unavailable(reason)), Some(url)) => {
            eprintln!("unread: warning: answering tenant={} from SQL: {reason}", who.tenant);
            if wrote {
                sql::mark_stale(url, &who.tenant, &who.user).await?;
            }
            from_truth(url.clone(), None).await
        }
        (Ok(Loaded::Miss(_)), None) => Err(script::malformed()),
        (Err(error), _) => Err(error),
    }
}

/// The answer of a call that wrote a user's setting to the truth and then
/// to Redis, once `overtaken` read whether the truth moved past what it
/// wrote to Redis: another call wrote after it there, and its Redis step may
/// have come first. If so, the user's Redis state is made the truth's again
/// and `from_truth` answers. A truth that cannot be read back leaves
/// `answer` as it is (a reconcile finds a drift): settling then would most
/// often fail too and unload the user, whose every call would then wait for
/// the SQL store to come back.
async fn unless_overtaken<T, O, F, Fut>(
    url: &str,
    who: &Principal,
    limits: Limits,
    answer: T,
    overtaken: O,
    from_truth: F,
) -> Result<T, Error>
where
    O: std::future::Future<Output = Result<bool, Error>>,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    match overtaken.await {
        Ok(false) => return Ok(answer),
        Ok(true) => {}
        Err(error) => {
            eprintln!("unread: warning: tenant={}: a setting could not be read back from SQL: {error:?}", who.tenant);
            return Ok(answer);
        }
    }
    if !reconcile::settle_user(url, who, limits).await {
        return Ok(answer);
    }
    from_truth().await.or_else(|error| {
        // Both writes are done: the call answers what it wrote.
        eprintln!("unread: warning: tenant={}: a settled answer could not be read from SQL: {error:?}", who.tenant);
        Ok(answer)
    })
}

/// A health check's outcome; the reason stays for the operator's log.
fn reachability(checked: Result<(), Error>) -> Reachability {
    match checked {
        Ok(()) => Reachability::Reachable,
        Err(Error::Unavailable(reason)) => Reachability::Unreachable(reason),
        Err(other) => Reachability::Unreachable(format!("{other:?}")),
    }
}

/// Milliseconds since the epoch, the clock of a row's `ts` and of the
/// truth's `updated_at` stamps.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Runs two futures at the same time (on the instance's one thread) and
/// gives both results.
pub(crate) async fn both<A: std::future::Future, B: std::future::Future>(a: A, b: B) -> (A::Output, B::Output) {
    use std::task::Poll;
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut left, mut right) = (None, None);
    std::future::poll_fn(|cx| {
        if left.is_none()
            && let Poll::Ready(value) = a.as_mut().poll(cx)
        {
            left = Some(value);
        }
        if right.is_none()
            && let Poll::Ready(value) = b.as_mut().poll(cx)
        {
            right = Some(value);
        }
        match (left.take(), right.take()) {
            (Some(l), Some(r)) => Poll::Ready((l, r)),
            (l, r) => {
                (left, right) = (l, r);
                Poll::Pending
            }
        }
    })
    .await
}

fn check_exact(value: u64, field: &str) -> Result<(), Error> {
    if value > MAX_EXACT {
        return Err(Error::Invalid(format!("{field} is too large")));
    }
    Ok(())
}

fn no_sql_store() -> Error {
    Error::NoSqlStore("this call needs the SQL store: set the sql_url variable".into())
}

/// A touch on Redis Cluster, whose parts cannot refuse together: the head
/// first, with the members its node serves (one call), which refuses or
/// vouches for the message's category and takes it (in a large
/// conversation, into its log); then the other members, told what the
/// head's round answered of the log (whose clock moves beside them); when
/// the head cannot vouch (a new conversation), every part is checked before
/// the head takes the message.
///
/// `sender_mark_moved` is set as soon as a round says it changed the
/// sender's mark-unread, so that a later round's failure does not hide it.
async fn touch_in_rounds(
    touch: &mut Touch<'_>,
    members: Vec<(String, Role)>,
    sender_mark_moved: &mut bool,
) -> Result<Touched, Error> {
    touch.mode = TouchMode::Head;
    touch.members = members.clone();
    let beside = cluster::items_beside_fixed_keys(&*touch);
    touch.members = beside.iter().map(|&at| members[at].clone()).collect();
    let mut head = redis::run(&*touch).await?;
    // Who the head's round wrote (none if it took nothing).
    let mut written: std::collections::HashSet<String> = Default::default();
    if let Touched::Unvouched = head {
        touch.members = members.clone();
        touch.mode = TouchMode::Check;
        if let refused @ Touched::Conflict { .. } = redis::run(&*touch).await? {
            return Ok(refused);
        }
        touch.members = Vec::new();
        touch.mode = TouchMode::First;
        head = redis::run(&*touch).await?;
    } else if let Touched::Done { deferred, .. } = &head {
        // Members the head's call left unwritten: in large conversations
        // (their logs are read in the members' round), or in a slot that
        // moved since the map was read.
        written = touch.members.iter().map(|(user, _)| user.clone()).filter(|user| !deferred.contains(user)).collect();
    }
    *sender_mark_moved |= matches!(head, Touched::Done { sender_mark_moved: true, .. });
    let Touched::Done { applied, large, fresh, logged, noted, head: head_seq, joiners, mut unanswered, .. } = head
    else {
        return Ok(head);
    };
    // A large conversation's clock moves beside the members' round (then
    // its event goes out). A member part that reads the clock before it
    // moved takes the message without the log's entries since its last
    // catch-up, and its next call catches up with them: no round waits.
    let moves: Vec<ClockMove> = large
        .map(|counter| ClockMove {
            conversation: touch.conversation.to_string(),
            counter: Some(counter),
            fresh,
            announce: Some(touch.seq),
            logged,
            // Not logged by this call (sent again, or late), a clock behind
            // its log may be behind for the head's message.
            also: if logged { None } else { head_seq },
        })
        .into_iter()
        .collect();
    let clock = MoveClocks::after(touch.tenant, &moves);
    touch.members = members.into_iter().filter(|(user, _)| !written.contains(user)).collect();
    touch.mode = TouchMode::Members;
    touch.large = large;
    // A message older than the head: a member new to the log is owed what
    // came after it, which its part cannot read (the head's slot).
    if large.is_some() && head_seq.is_some_and(|head| head > touch.seq) && !touch.members.is_empty() {
        let wanted = [WantedLog { conversation: touch.conversation.to_string(), after: 0 }];
        let conversations = keys::conversations_prefix(touch.tenant);
        let logs = GroupLogs { conversations: &conversations, wanted: &wanted };
        touch.late = redis::run(&logs).await?.pop();
    }
    let mut by_members = false;
    if touch.members.is_empty() {
        clock.await?;
    } else {
        let (clock, touched) = both(clock, redis::run(&*touch)).await;
        *sender_mark_moved |= matches!(touched, Ok(Touched::Done { sender_mark_moved: true, .. }));
        clock?;
        match touched? {
            Touched::Done { applied, unanswered: unanswered_by_members, .. } => {
                by_members = applied;
                unanswered.extend(unanswered_by_members);
            }
            refused => return Ok(refused),
        }
    }
    // The event of a message a rebuild noted is out: the note goes (if this
    // fails, a touch sent again announces it again, never not at all).
    if noted {
        let forget = ForgetUnannounced { tenant: touch.tenant, conversation: touch.conversation, seq: touch.seq };
        redis::run(&forget).await?;
    }
    Ok(Touched::Done {
        applied: applied || by_members,
        large,
        fresh,
        logged,
        noted,
        head: head_seq,
        sender_mark_moved: *sender_mark_moved,
        unanswered,
        joiners,
        deferred: Vec::new(),
    })
}

/// A touch refused for a member's category, or the head's.
fn touched_conflict(user: Option<String>, category: &str) -> Error {
    match user {
        Some(user) => category_conflict(&format!("for member {user:?}"), category),
        None => category_conflict("in its head", category),
    }
}

/// A touch in another category than the conversation's (`whose`: where the
/// conversation has it).
fn category_conflict(whose: &str, category: &str) -> Error {
    Error::Conflict(format!("the conversation is in category {category:?} {whose}; a conversation keeps its category"))
}

/// The user has no such conversation.
fn unknown_conversation(conversation: &str) -> Error {
    Error::UnknownConversation(format!("no conversation {conversation:?} for this user"))
}

/// Every user once, in order; `extra` (the sender) joins them.
fn once_each(users: Vec<String>, extra: Option<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    users.into_iter().chain(extra).filter(|m| seen.insert(m.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_gives_each_result_whichever_is_ready_first() {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let slow = async {
            let mut polled = false;
            std::future::poll_fn(|_| {
                if std::mem::replace(&mut polled, true) {
                    std::task::Poll::Ready("slow")
                } else {
                    std::task::Poll::Pending
                }
            })
            .await
        };
        let mut joined = std::pin::pin!(both(slow, async { 7 }));
        assert!(joined.as_mut().poll(&mut cx).is_pending());
        assert_eq!(joined.as_mut().poll(&mut cx), std::task::Poll::Ready(("slow", 7)));
    }

    #[test]
    fn cursors_name_section_score_and_conversation() {
        let cursor = ListCursor::parse("1.1764460800123017.c.42").unwrap();
        assert_eq!(cursor, ListCursor { section: 1, score: 1764460800123017, conversation: "c.42".into() });
        assert_eq!(cursor.text(), "1.1764460800123017.c.42");
        for bad in ["", "1", "2.5.c", "0..c", "0.5.", "0.x.c", "0.9007199254740992.c"] {
            assert!(ListCursor::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cursors_carry_any_conversation_id_url_safe() {
        for id in ["#general", "a b&c=d", "ünï", "~x", "a+b%2F"] {
            let cursor = ListCursor { section: 0, score: 7, conversation: id.into() };
            let text = cursor.text();
            assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b"._~".contains(&b)), "{text}");
            assert_eq!(ListCursor::parse(&text).unwrap(), cursor);
        }
        // One id, one cursor text: a plain id is never hex-encoded, and hex is lower-case and whole.
        for bad in ["0.5.~", "0.5.~6", "0.5.~6A", "0.5.~63", "0.5.~zz", "0.5.a b", "0.5.~ff"] {
            assert!(ListCursor::parse(bad).is_err(), "{bad}");
        }
    }
}

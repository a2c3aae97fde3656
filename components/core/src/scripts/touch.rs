//! `touch.lua`: a stored message, for every member in one step.

use crate::Error;
use crate::keys::{ConversationKeys, UserKeys, events_channel};
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua, malformed};

/// What a member is to the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sent it: the message reads the conversation for them.
    Sender,
    /// Named in its mentions.
    Mentioned,
    /// Neither.
    Member,
}

/// A message stored by the app.
pub struct Touch<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
    pub seq: u64,
    /// The list score of the message (see [`crate::state::score`]).
    pub score: u64,
    pub category: &'a str,
    /// Compact JSON object text.
    pub preview: &'a str,
    /// The message mentions everyone but the sender.
    pub mention_all: bool,
    pub max_conversations: u32,
    pub max_kept: u32,
    /// With a SQL store: users Redis has not loaded are left to the truth.
    pub require_loaded: bool,
    /// Every member once, with their role.
    pub members: Vec<(String, Role)>,
    /// Which step of the touch this call is.
    pub mode: TouchMode,
    /// A conversation becomes large (read diffusion) when one touch names
    /// more members than this; 0: none becomes large.
    pub large_threshold: u32,
    /// How many members the whole touch names (a round of a touch on Redis
    /// Cluster may carry none of them).
    pub named: u32,
    /// With a SQL store: the truth has the conversation large (Redis makes
    /// it large again if it lost its log).
    pub large_in_truth: bool,
    /// With a SQL store: the truth has the conversation in this message's
    /// category (the app may have moved it since Redis took its category).
    pub category_in_truth: bool,
    /// With a SQL store: whether the truth holds the sender's mark-unread
    /// after this message (it went only if the message moved their read
    /// cursor there); the sender's state takes it. Without one, the
    /// message clears it if it moves the cursor in Redis.
    pub sender_marked: Option<bool>,
    /// For a members round on Redis Cluster: the counter of the
    /// conversation's log after this message, as the head's round answered
    /// it; none if it is not large.
    pub large: Option<u64>,
    /// For a members round on Redis Cluster, when the head's round found
    /// the message older than the head: the conversation's log from its
    /// start (a [`super::GroupLogs`] line), which a member new to it
    /// catches up with (its part has no head to read it from).
    pub late: Option<String>,
}

/// The steps of a touch. Standalone Redis takes the whole touch in one; on
/// Redis Cluster the head and the members' slots are separate parts, which
/// cannot refuse together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TouchMode {
    /// The whole touch, refused as a whole.
    All,
    /// The head, with the members its node serves: refuses another category
    /// than the head's, takes the message (for those members too) when the
    /// head vouches for its category, and otherwise writes nothing
    /// ([`Touched::Unvouched`]). It hands back, unwritten, the members who
    /// catch up with large conversations (the members' round reads their
    /// logs once), and a part without the head all of its members
    /// ([`Touched::Done`]'s `deferred`).
    Head,
    /// The other members, after the head took the message.
    Members,
    /// The head alone, taking the message whatever category it holds: after
    /// a [`TouchMode::Check`] round found no conflict.
    First,
    /// Only looks for a conflict in every part, writing nothing (before
    /// [`TouchMode::All`] when the head could not vouch).
    Check,
}

/// What a touch did.
pub enum Touched {
    /// Applied to the members Redis can answer for; `unanswered` are left
    /// to the SQL store. `large`: the counter of a large conversation's log
    /// after the message (from the part that holds the head); `fresh`: the
    /// message made the log (its counter starts over); `logged`: the
    /// message moved the log, or a rebuild moved it and left the event to
    /// this touch (its conversation's event is due); `noted`: on Redis
    /// Cluster, by the rebuild's note, for the caller to forget once the
    /// event is out ([`super::ForgetUnannounced`]); `joiners`: who
    /// joined it lately while it was not large (the message that made it
    /// large may not name them), handed over by every message of the large
    /// conversation until the caller forgets them
    /// ([`super::ForgetJoiners`]); `deferred`: members a [`TouchMode::Head`]
    /// round left unwritten, for the members' round.
    Done {
        applied: bool,
        large: Option<u64>,
        fresh: bool,
        logged: bool,
        noted: bool,
        /// The seq of the conversation's head after the call (none from a
        /// members part, which has no head).
        head: Option<u64>,
        /// With a SQL store, the sender's mark-unread changed in Redis to
        /// the truth's (`sender_marked`), which a call at once may have
        /// moved since: the caller reads it back.
        sender_mark_moved: bool,
        unanswered: Vec<String>,
        joiners: Vec<String>,
        deferred: Vec<String>,
    },
    /// A member (none: the head) has the conversation in another category;
    /// nothing was written.
    Conflict { user: Option<String>, category: String },
    /// The head holds no category to check the message's against; nothing
    /// was written.
    Unvouched,
}

impl Script for Touch<'_> {
    type Reply = Touched;

    fn lua() -> &'static Lua {
        lua!("touch.lua")
    }

    fn encode(&self, call: &mut Call) {
        // The members' round comes after the head took the message: none of
        // its parts runs in the head's slot for the head's sake.
        if self.mode != TouchMode::Members {
            ConversationKeys::new(self.tenant, self.conversation).encode(call);
        }
        call.arg("conversation", self.conversation);
        call.arg("seq", self.seq);
        call.arg("score", self.score);
        call.arg("category", self.category);
        call.arg("preview", self.preview);
        call.arg("mention_all", self.mention_all);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("require_loaded", self.require_loaded);
        call.arg("channel", events_channel(self.tenant));
        call.arg("head_ttl", crate::HEAD_TTL);
        call.arg(
            "mode",
            match self.mode {
                TouchMode::All => "all",
                TouchMode::Head => "head",
                TouchMode::Members => "members",
                TouchMode::Check => "check",
                TouchMode::First => "first",
            },
        );
        call.arg("large_threshold", self.large_threshold);
        call.arg("named", self.named);
        call.arg("large_in_truth", self.large_in_truth);
        call.arg("category_in_truth", self.category_in_truth);
        call.arg("sender_marked", self.sender_marked.map(|marked| if marked { "1" } else { "0" }).unwrap_or_default());
        call.arg("large", self.large.map(|n| n.to_string()).unwrap_or_default());
        call.arg("late", self.late.as_deref().unwrap_or_default());
        call.logs(self.tenant);
        call.each(&self.members, |item, (user, role)| {
            UserKeys::new(self.tenant, user).encode(item);
            item.arg("user", user);
            item.arg(
                "role",
                match role {
                    Role::Sender => "s",
                    Role::Mentioned => "m",
                    Role::Member => "",
                },
            );
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<Touched, Error> {
        match reply.text()?.as_str() {
            "ok" => {
                let applied = reply.flag()?;
                let large = reply.optional_number()?;
                let fresh = reply.flag()?;
                let logged = reply.flag()?;
                let noted = reply.flag()?;
                let head = reply.optional_number()?;
                let sender_mark_moved = reply.flag()?;
                let unanswered = reply.texts()?;
                let joiners = reply.texts()?;
                let deferred = reply.texts()?;
                Ok(Touched::Done {
                    applied,
                    large,
                    fresh,
                    logged,
                    noted,
                    head,
                    sender_mark_moved,
                    unanswered,
                    joiners,
                    deferred,
                })
            }
            "conflict" => {
                let user = Some(reply.text()?).filter(|user| !user.is_empty());
                Ok(Touched::Conflict { user, category: reply.text()? })
            }
            "unvouched" => Ok(Touched::Unvouched),
            _ => Err(malformed()),
        }
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Touched, Error> {
        let (mut applied, mut large, mut fresh, mut logged, mut noted, mut head, mut sender_mark_moved) =
            (false, None, false, false, false, None, false);
        let (mut unanswered, mut joiners, mut deferred) = (Vec::new(), Vec::new(), Vec::new());
        for part in decode_parts(self, parts)? {
            match part {
                refused @ (Touched::Conflict { .. } | Touched::Unvouched) => return Ok(refused),
                Touched::Done {
                    applied: a,
                    large: l,
                    fresh: f,
                    logged: g,
                    noted: n,
                    head: h,
                    sender_mark_moved: s,
                    unanswered: u,
                    joiners: j,
                    deferred: d,
                } => {
                    applied |= a;
                    large = large.or(l);
                    fresh |= f;
                    logged |= g;
                    noted |= n;
                    head = head.or(h);
                    sender_mark_moved |= s;
                    unanswered.extend(u);
                    joiners.extend(j);
                    deferred.extend(d);
                }
            }
        }
        Ok(Touched::Done {
            applied,
            large,
            fresh,
            logged,
            noted,
            head,
            sender_mark_moved,
            unanswered,
            joiners,
            deferred,
        })
    }
}

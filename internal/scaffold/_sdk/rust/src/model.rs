//! The typed model of ABI version 1 (sdk/ABI.md sections 3 to 5, and the
//! grouped layout of section 7).
//!
//! Topics and members are referred to by index: a member's subscriptions and
//! owned partitions name entries of [`Request::topics`], and a response names
//! entries of [`Request::members`]. In the grouped layout an entry may name a
//! list of topics instead ([`TopicPartitions::list`]), an index into a
//! topic-list table ([`Request::topic_lists`], [`Response::topic_lists`]). A
//! decoded request has every index checked, so an assignor may index with
//! them directly.

/// How the members of a group hand partitions over (the request's
/// `rebalance_protocol` byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Members revoke everything before each rebalance; any partition may move.
    Eager,
    /// Members keep what they own across a rebalance (KIP-429). The host
    /// withholds moved partitions for a generation, so an assignor returns its
    /// target assignment either way.
    Cooperative,
}

impl Default for RebalanceProtocol {
    fn default() -> Self {
        RebalanceProtocol::Eager
    }
}

/// What the host asks an assignor to solve.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The consumer group being rebalanced.
    pub group_id: String,
    /// The generation this assignment is for.
    pub generation: i32,
    /// The client protocol name the members agreed on.
    pub protocol: String,
    /// The assignor to run, for modules that provide several.
    pub assignor: String,
    /// Eager or cooperative.
    pub rebalance_protocol: RebalanceProtocol,
    /// The only randomness a deterministic assignor may use.
    pub seed: u64,
    /// The operator's plugin configuration for this group, keys strictly
    /// ascending by bytes (the decoder enforces it; the encoder sorts).
    pub config: Vec<(String, String)>,
    /// The cluster's brokers.
    pub brokers: Vec<Broker>,
    /// Distinct broker-id lists that [`Partition::replicas`] and
    /// [`Partition::isr`] index.
    pub replica_sets: Vec<Vec<i32>>,
    /// The topic table: every subscribed topic and every topic a member
    /// mentions, existing or not.
    pub topics: Vec<Topic>,
    /// The members, in Kafka's order (static by instance id, then dynamic by
    /// member id).
    pub members: Vec<Member>,
    /// The topic-list table of the grouped layout (sdk/ABI.md section 7):
    /// `Some` exactly when the request came in that layout, even if the table
    /// is empty. Each list is strictly ascending and not empty, and holds
    /// indices into [`Request::topics`]. Members name their subscription by
    /// an index into this table ([`Member::subscription`]), and owned and
    /// previous entries may name a list ([`TopicPartitions::list`]). The host
    /// sends it only to assignors that declare [`AssignorInfo::grouped`].
    pub topic_lists: Option<Vec<Vec<u32>>>,
}

impl Request {
    /// Returns the value of config key `key`, if the operator set it.
    pub fn config(&self, key: &str) -> Option<&str> {
        self.config
            .binary_search_by(|(k, _)| k.as_bytes().cmp(key.as_bytes()))
            .ok()
            .map(|i| self.config[i].1.as_str())
    }
}

/// One broker of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Broker {
    /// The broker id.
    pub id: i32,
    /// Its rack; empty when it has none.
    pub rack: String,
}

/// One entry of the request's topic table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topic {
    /// The topic name, unique in the table.
    pub name: String,
    /// The topic UUID, all zero when unknown.
    pub id: [u8; 16],
    /// False for a name members mention that the cluster does not have; such
    /// a topic has no partitions.
    pub exists: bool,
    /// Partitions are `0..partition_count`.
    pub partition_count: i32,
    /// `None` when the host sent no placement; otherwise exactly
    /// `partition_count` entries, entry `i` for partition `i`.
    pub placement: Option<Vec<Partition>>,
}

/// The placement of one partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Partition {
    /// The leader's broker id, -1 when unknown.
    pub leader: i32,
    /// Index into [`Request::replica_sets`].
    pub replicas: u32,
    /// Index into [`Request::replica_sets`].
    pub isr: u32,
}

/// One member of the group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Member {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its group.instance.id; empty for a dynamic member.
    pub instance_id: String,
    /// The client.id it connected with.
    pub client_id: String,
    /// The host it connected from.
    pub client_host: String,
    /// Its rack (KIP-881 or inferred); empty when unknown.
    pub rack: String,
    /// True when every protocol it offered is cooperative.
    pub cooperative: bool,
    /// Subscribed topics as indices into [`Request::topics`], strictly
    /// ascending. Filled in both layouts: in the grouped one it is a copy of
    /// the list [`Member::subscription`] names.
    pub topics: Vec<u32>,
    /// In the grouped layout, the index into [`Request::topic_lists`] of the
    /// member's subscription; `None` when it subscribes to no topics, and
    /// always `None` in the plain layout. The host writes each distinct
    /// subscription once, so members with equal subscriptions share an
    /// index and an assignor may group them by it (a hand-made table may
    /// repeat a list, so equal topics do not imply equal indices).
    pub subscription: Option<u32>,
    /// The generation of `owned`, -1 when the member did not report one.
    pub owned_generation: i32,
    /// What the member reports it owns.
    pub owned: Vec<TopicPartitions>,
    /// The raw user data of its subscription; empty when absent.
    pub user_data: Vec<u8>,
    /// What the host assigned it in the previous generation.
    pub previous: Vec<TopicPartitions>,
}

impl Member {
    /// Reports whether the member subscribes to topic index `t`.
    pub fn subscribes(&self, t: u32) -> bool {
        self.topics.binary_search(&t).is_ok()
    }
}

/// A set of partitions of one topic, or of each topic of a topic list (one
/// entry of a `tps` list).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicPartitions {
    /// Index into [`Request::topics`] when `list` is false; index into a
    /// topic-list table when `list` is true.
    pub topic: u32,
    /// Partition ids.
    pub partitions: Vec<i32>,
    /// Grouped layout only: true when `topic` indexes a topic-list table
    /// (the request's [`Request::topic_lists`] in owned and previous
    /// entries, the response's [`Response::topic_lists`] in assignments) and
    /// the entry stands for `partitions` of each topic of that list, in list
    /// order. On the wire such a reference is the negative value
    /// `-1 - topic`.
    pub list: bool,
}

/// A successful answer: what each member receives. Members left out receive
/// nothing. An assignor's failure is the `Err(String)` of a [`Reply`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    /// One entry per member that receives something.
    pub assignments: Vec<MemberAssignment>,
    /// The response's own topic-list table (grouped layout): `Some` makes the
    /// encoder write the grouped layout, so assignment entries with
    /// [`TopicPartitions::list`] may name its lists. Each list must be
    /// strictly ascending and not empty, with indices into
    /// [`Request::topics`]. Set it only when the request had
    /// [`Request::topic_lists`]; the host rejects it otherwise.
    pub topic_lists: Option<Vec<Vec<u32>>>,
}

/// A response as it travels on the wire: an assignment, or an error message
/// (non-empty) that makes the host fall back to another assignor.
pub type Reply = Result<Response, String>;

/// What one member receives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberAssignment {
    /// Index into [`Request::members`].
    pub member: u32,
    /// Its partitions; topic indices refer to [`Request::topics`], or to
    /// [`Response::topic_lists`] for entries with [`TopicPartitions::list`].
    pub partitions: Vec<TopicPartitions>,
    /// Sent to the member in its ConsumerProtocolAssignment.
    pub user_data: Vec<u8>,
}

/// The rebalance protocols an assignor supports (the description's `modes`
/// byte).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modes(pub u8);

impl Modes {
    /// Eager groups only.
    pub const EAGER: Modes = Modes(1);
    /// Cooperative groups only.
    pub const COOPERATIVE: Modes = Modes(2);
    /// Both: the usual choice, since the host withholds moved partitions for
    /// cooperative groups.
    pub const BOTH: Modes = Modes(3);
}

/// What a module says about itself (section 4).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Description {
    /// The module's assignors.
    pub assignors: Vec<AssignorInfo>,
}

/// The description of one assignor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssignorInfo {
    /// How operators refer to it; unique within the host.
    pub name: String,
    /// Free form, such as "1.2.0".
    pub version: String,
    /// Client protocol names it answers for; at least one.
    pub protocols: Vec<String>,
    /// Eager, cooperative or both.
    pub modes: Modes,
    /// True when it may leave subscribed partitions unassigned on purpose.
    pub may_leave_unassigned: bool,
    /// One line for operators.
    pub description: String,
    /// True when it accepts requests in the grouped layout (sdk/ABI.md
    /// section 7, description flag bit 1); the host sends grouped requests
    /// only to assignors that set it.
    pub grouped: bool,
}

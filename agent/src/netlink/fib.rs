//! FIB lookups (`ip route get`) on a socket of their own: the requests of a
//! batch written into one buffer and sent at once, the answers read into
//! another, both kept between reconciles, and each answer parsed into one
//! reused message. A node's 500 lookups allocate nothing per lookup;
//! through rtnetlink's handle each cost a request channel, a response
//! stream, a task slot and a parsed message (most of a reconcile's heap
//! allocations, issue 41).

use std::{collections::BTreeMap, net::IpAddr};

use netlink_packet_core::{
    ErrorBuffer, NLM_F_REQUEST, NLMSG_ERROR, NetlinkBuffer, NetlinkMessage, NlaBuffer,
    NlasIterator, ParseableParametrized as _,
};
use netlink_packet_route::{
    RouteNetlinkMessage,
    route::{RouteAddress, RouteAttribute, RouteHeader, RouteLwEnCapType, RouteMessage},
};
use netlink_sys::{AsyncSocket as _, AsyncSocketExt as _, SocketAddr, TokioSocket};
use rtnetlink::RouteMessageBuilder;
use tokio::sync::Mutex;

use super::convert;
use crate::inventory::FibResult;

/// How many lookups are sent in one batch before their answers are read: the
/// answers wait in the socket's receive buffer meanwhile (about 1 KiB each
/// with the kernel's overhead, far below its default 208 KiB).
pub(super) const BATCH: usize = 64;

/// `RTM_NEWROUTE`: a lookup's answer.
const RTM_NEWROUTE: u16 = 24;
/// The route attributes a FIB answer is read from ([`convert::route`]):
/// `RTA_DST`, `RTA_OIF`, `RTA_GATEWAY`, `RTA_TABLE`.
const READ: [u16; 4] = [1, 4, 5, 15];
/// Room for one datagram of answers (each a few hundred bytes).
const RECV_BUFFER: usize = 32 * 1024;

/// The socket and what is kept between lookups.
#[derive(Debug)]
pub(super) struct Fib {
    state: Mutex<State>,
}

struct State {
    socket: TokioSocket,
    /// The next sequence number: answers to an earlier, dropped batch are told apart.
    seq: u32,
    out: Vec<u8>,
    input: Vec<u8>,
    /// The request for each family, its destination replaced per lookup.
    v4: NetlinkMessage<RouteNetlinkMessage>,
    v6: NetlinkMessage<RouteNetlinkMessage>,
    /// One answer, parsed: its attributes' room is kept.
    answer: RouteMessage,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl Fib {
    /// Opens the socket in the calling thread's network namespace.
    pub(super) fn connect() -> std::io::Result<Self> {
        let mut socket = TokioSocket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
        socket.socket_mut().bind_auto()?;
        socket.socket_mut().connect(&SocketAddr::new(0, 0))?;
        Ok(Self {
            state: Mutex::new(State {
                socket,
                seq: 0,
                out: Vec::with_capacity(BATCH * 64),
                input: Vec::with_capacity(RECV_BUFFER),
                v4: request(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
                v6: request(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)),
                answer: RouteMessage::default(),
            }),
        })
    }

    /// The FIB answer for each of `ips` (sorted, no duplicates).
    pub(super) async fn lookup(&self, ips: &[IpAddr]) -> BTreeMap<IpAddr, FibResult> {
        let mut state = self.state.lock().await;
        let mut out = BTreeMap::new();
        for batch in ips.chunks(BATCH) {
            state.batch(batch, &mut out).await;
        }
        out
    }
}

/// What `ip route get` sends for an address of `ip`'s family, as
/// rtnetlink's builder makes it (the main table, unicast, universe scope).
fn request(ip: IpAddr) -> NetlinkMessage<RouteNetlinkMessage> {
    let full = if ip.is_ipv4() { 32 } else { 128 };
    let msg = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(ip, full)
        .map_or_else(|_| RouteMessage::default(), RouteMessageBuilder::build);
    let mut req = NetlinkMessage::from(RouteNetlinkMessage::GetRoute(msg));
    req.header.flags = NLM_F_REQUEST;
    req
}

impl State {
    /// Sends the lookups of `ips` at once and reads their answers into `out`.
    async fn batch(&mut self, ips: &[IpAddr], out: &mut BTreeMap<IpAddr, FibResult>) {
        let first = self.seq;
        self.seq = self
            .seq
            .wrapping_add(u32::try_from(ips.len()).unwrap_or(u32::MAX));
        self.out.clear();
        for (k, ip) in ips.iter().enumerate() {
            let seq = first.wrapping_add(u32::try_from(k).unwrap_or(u32::MAX));
            self.write(*ip, seq);
        }
        if let Err(e) = self.socket.send(&self.out).await {
            for ip in ips {
                out.insert(*ip, FibResult::Other(format!("lookup failed: {e}")));
            }
            return;
        }
        let mut left = ips.len();
        while left > 0 {
            self.input.clear();
            if let Err(e) = self.socket.recv(&mut self.input).await {
                // The answers still due are lost (ENOBUFS): said, not waited for.
                for ip in ips {
                    out.entry(*ip)
                        .or_insert_with(|| FibResult::Other(format!("lookup failed: {e}")));
                }
                return;
            }
            left -= self.read(ips, first, out);
        }
    }

    /// Appends the request for `ip` with sequence number `seq` to the batch.
    fn write(&mut self, ip: IpAddr, seq: u32) {
        let req = if ip.is_ipv4() {
            &mut self.v4
        } else {
            &mut self.v6
        };
        if let netlink_packet_core::NetlinkPayload::InnerMessage(RouteNetlinkMessage::GetRoute(m)) =
            &mut req.payload
        {
            for a in &mut m.attributes {
                if let RouteAttribute::Destination(d) = a {
                    *d = RouteAddress::from(ip);
                }
            }
        }
        req.header.sequence_number = seq;
        req.finalize();
        let start = self.out.len();
        self.out.resize(start + req.buffer_len(), 0);
        req.serialize(&mut self.out[start..]);
    }

    /// The answers in the datagram just read, into `out`; how many of the
    /// batch's (sequence numbers `first`…) they were.
    fn read(&mut self, ips: &[IpAddr], first: u32, out: &mut BTreeMap<IpAddr, FibResult>) -> usize {
        let mut done = 0;
        let mut at = 0;
        while let Ok(msg) = NetlinkBuffer::new_checked(&self.input[at..]) {
            let len = usize::try_from(msg.length()).unwrap_or(0);
            let k =
                usize::try_from(msg.sequence_number().wrapping_sub(first)).unwrap_or(usize::MAX);
            if let Some(ip) = ips.get(k)
                && !out.contains_key(ip)
            {
                let answer = match msg.message_type() {
                    NLMSG_ERROR => ErrorBuffer::new_checked(msg.payload()).map_or_else(
                        |e| FibResult::Other(format!("lookup failed: {e}")),
                        |b| convert::fib_answer(Err(b.code().map_or(0, std::num::NonZero::get))),
                    ),
                    RTM_NEWROUTE => parse_answer(&mut self.answer, msg.payload()),
                    other => FibResult::Other(format!("lookup failed: message type {other}")),
                };
                out.insert(*ip, answer);
                done += 1;
            }
            // Messages are 4-byte aligned; a zero length would loop.
            let step = (len + 3) & !3;
            if step == 0 {
                break;
            }
            at += step;
            if at >= self.input.len() {
                break;
            }
        }
        done
    }
}

/// A lookup's answer: its header and the attributes [`convert::route`]
/// reads, parsed into `msg` (its attributes' room reused), then converted.
fn parse_answer(msg: &mut RouteMessage, payload: &[u8]) -> FibResult {
    let mut parse = || {
        let header = RouteHeader::parse(payload)?;
        msg.attributes.clear();
        let param = (header.address_family, header.kind, RouteLwEnCapType::None);
        msg.header = header;
        for nla in NlasIterator::new(payload.get(12..).unwrap_or_default()) {
            let nla: NlaBuffer<&[u8]> = nla?;
            if READ.contains(&nla.kind()) {
                msg.attributes
                    .push(RouteAttribute::parse_with_param(&nla, param)?);
            }
        }
        Ok::<_, netlink_packet_core::DecodeError>(())
    };
    match parse() {
        Ok(()) => convert::fib_answer(Ok(msg)),
        Err(e) => FibResult::Other(format!("lookup failed: {e}")),
    }
}

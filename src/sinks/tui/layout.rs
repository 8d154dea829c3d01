//! Where things go on the screen, decided from its size alone: a title
//! row, the instance's headroom to its baseline (when one is known), a few
//! rows per interface (fewer as the screen shrinks), the flow table, a
//! status row; and which flow columns fit the width.

use ratatui::layout::Rect;

/// Below this the view shows a "terminal too small" notice instead.
pub(crate) const MIN_WIDTH: u16 = 40;
pub(crate) const MIN_HEIGHT: u16 = 8;

/// Rows kept for the flow table before interfaces get their full height:
/// its header and three flows.
const FLOW_ROWS_MIN: u16 = 4;

/// Rows per interface, at most: rates, allowance rates, verdict, history.
pub(crate) const IFACE_ROWS_FULL: u16 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub title: Rect,
    /// The instance's headroom row, when asked for.
    pub headroom: Option<Rect>,
    /// One area per interface shown, each `rows_each` high.
    pub ifaces: Vec<Rect>,
    pub rows_each: u16,
    /// Interfaces that did not fit.
    pub hidden_ifaces: usize,
    pub flows: Rect,
    pub status: Rect,
}

/// The plan for `area` with `n_ifaces` interfaces, and a headroom row
/// when `headroom` (a baseline is known); `None` when the area is too small
/// to show anything useful.
pub(crate) fn plan(area: Rect, n_ifaces: usize, headroom: bool) -> Option<Plan> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let row = |y: u16, h: u16| Rect::new(area.x, y, area.width, h);
    // The headroom row comes out of the middle, and the flow table keeps
    // its minimum: on a short screen an interface may hide for it, as the
    // instance's line says something about all of them.
    let headroom_rows = u16::from(headroom);
    let middle = area.height.saturating_sub(2 + headroom_rows);
    let budget = middle.saturating_sub(FLOW_ROWS_MIN);
    let n = u16::try_from(n_ifaces).unwrap_or(u16::MAX);
    let rows_each = budget
        .checked_div(n)
        .map_or(1, |r| r.clamp(1, IFACE_ROWS_FULL));
    let shown = n.min(budget / rows_each);
    let top = area.y.saturating_add(1 + headroom_rows);
    let ifaces = (0..shown)
        .map(|i| row(top.saturating_add(i * rows_each), rows_each))
        .collect();
    // With no interface, one row says so.
    let iface_rows = if n == 0 { 1 } else { shown * rows_each };
    let flows_y = top.saturating_add(iface_rows);
    Some(Plan {
        title: row(area.y, 1),
        headroom: headroom.then(|| row(area.y.saturating_add(1), 1)),
        ifaces,
        rows_each,
        hidden_ifaces: n_ifaces.saturating_sub(shown as usize),
        flows: row(flows_y, middle.saturating_sub(iface_rows)),
        status: row(area.bottom().saturating_sub(1), 1),
    })
}

/// A column of the flow table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    Rank,
    Backoff,
    Peer,
    LocalPort,
    /// Only with several interfaces: which one the flow uses.
    Iface,
    Owner,
    /// Only when some flow's pod, container, service or namespace is known.
    Workload,
    Tx,
    Rtt,
    Cwnd,
    Retrans,
    State,
}

impl Column {
    /// Left to right.
    pub(crate) const ALL: [Column; 12] = [
        Column::Rank,
        Column::Backoff,
        Column::Peer,
        Column::LocalPort,
        Column::Iface,
        Column::Owner,
        Column::Workload,
        Column::Tx,
        Column::Rtt,
        Column::Cwnd,
        Column::Retrans,
        Column::State,
    ];

    /// Most wanted first: who, how fast, how delayed, how lossy.
    const BY_PRIORITY: [Column; 12] = [
        Column::Peer,
        Column::LocalPort,
        Column::Tx,
        Column::Rtt,
        Column::Retrans,
        Column::Backoff,
        Column::Cwnd,
        Column::Owner,
        Column::Workload,
        Column::State,
        Column::Rank,
        Column::Iface,
    ];

    pub(crate) fn title(self) -> &'static str {
        match self {
            Column::Rank => "#",
            Column::Backoff => "backoff",
            Column::Peer => "peer",
            Column::LocalPort => "lport",
            Column::Iface => "iface",
            Column::Owner => "process",
            Column::Workload => "workload",
            Column::Tx => "tx",
            Column::Rtt => "srtt/min_rtt",
            Column::Cwnd => "cwnd",
            Column::Retrans => "retrans",
            Column::State => "state",
        }
    }

    /// The width a column needs; the peer column's depends on the
    /// addresses shown (IPv6 is wider).
    pub(crate) fn width(self, peer_width: u16) -> u16 {
        match self {
            Column::Rank => 3,
            Column::Backoff => 8,
            Column::Peer => peer_width,
            Column::LocalPort => 5,
            // most names; longer ones are cut
            Column::Iface => 10,
            // comm (15) / pid
            Column::Owner => 22,
            // namespace/pod names are longer; longer ones are cut
            Column::Workload => 24,
            Column::Tx => 10,
            Column::Rtt => 20,
            Column::Cwnd => 6,
            Column::Retrans => 8,
            Column::State => 14,
        }
    }
}

/// Space between columns.
pub(crate) const COLUMN_SPACING: u16 = 1;

/// Width of the peer column: the longest address shown, within bounds
/// (`255.255.255.255:65535` is 21, a full IPv6 address with port 47).
pub(crate) fn peer_width<'a>(peers: impl Iterator<Item = &'a str>) -> u16 {
    let longest = peers.map(|p| p.chars().count()).max().unwrap_or(0);
    u16::try_from(longest).unwrap_or(u16::MAX).clamp(15, 47)
}

/// The most wanted columns that fit in `width`, in display order. The
/// interface column only when asked (`iface`: the snapshot has several
/// interfaces), and last in priority; the workload column only when some
/// flow has one (`workload`).
pub(crate) fn columns_for(width: u16, peer_width: u16, iface: bool, workload: bool) -> Vec<Column> {
    let mut used: u16 = 0;
    let mut chosen = Vec::new();
    for c in Column::BY_PRIORITY
        .into_iter()
        .filter(|c| iface || *c != Column::Iface)
        .filter(|c| workload || *c != Column::Workload)
    {
        let gap = if chosen.is_empty() { 0 } else { COLUMN_SPACING };
        let need = used.saturating_add(gap).saturating_add(c.width(peer_width));
        if need > width {
            break;
        }
        used = need;
        chosen.push(c);
    }
    Column::ALL
        .into_iter()
        .filter(|c| chosen.contains(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_small_is_none() {
        assert_eq!(plan(Rect::new(0, 0, 20, 5), 1, false), None);
        assert_eq!(plan(Rect::new(0, 0, 39, 40), 1, false), None);
        assert_eq!(plan(Rect::new(0, 0, 120, 7), 1, true), None);
        assert_eq!(plan(Rect::new(0, 0, 0, 0), 0, false), None);
        assert!(plan(Rect::new(0, 0, MIN_WIDTH, MIN_HEIGHT), 1, false).is_some());
        assert!(plan(Rect::new(0, 0, MIN_WIDTH, MIN_HEIGHT), 1, true).is_some());
    }

    #[test]
    fn rows_add_up_to_the_screen() {
        for ((w, h, n), headroom) in [
            (120, 40, 1),
            (60, 15, 2),
            (40, 8, 3),
            (200, 60, 12),
            (80, 24, 0),
        ]
        .into_iter()
        .flat_map(|size| [(size, false), (size, true)])
        {
            let p = plan(Rect::new(0, 0, w, h), n, headroom).unwrap();
            let iface_rows: u16 = p.ifaces.iter().map(|r| r.height).sum();
            let iface_rows = if n == 0 { 1 } else { iface_rows };
            let headroom_rows = p.headroom.map_or(0, |r| r.height);
            assert_eq!(headroom_rows, u16::from(headroom));
            assert_eq!(
                p.title.height + headroom_rows + iface_rows + p.flows.height + p.status.height,
                h,
                "{w}x{h} with {n} interfaces: {p:?}"
            );
            if let Some(r) = p.headroom {
                assert_eq!(r.y, 1, "right under the title: {p:?}");
                assert!(p.ifaces.iter().all(|i| i.y > r.y), "{p:?}");
            }
            assert_eq!(p.ifaces.len() + p.hidden_ifaces, n);
            assert!(p.flows.height >= FLOW_ROWS_MIN, "{p:?}");
            assert_eq!(p.status.y, h - 1);
        }
    }

    #[test]
    fn interfaces_get_fewer_rows_as_the_screen_shrinks() {
        let full = plan(Rect::new(0, 0, 120, 40), 2, true).unwrap();
        assert_eq!(full.rows_each, IFACE_ROWS_FULL);
        let small = plan(Rect::new(0, 0, 60, 12), 2, false).unwrap();
        assert_eq!(small.rows_each, 3);
        let many = plan(Rect::new(0, 0, 60, 12), 10, false).unwrap();
        assert_eq!(many.rows_each, 1);
        assert_eq!(many.ifaces.len(), 6);
        assert_eq!(many.hidden_ifaces, 4);
    }

    #[test]
    fn columns_fit_the_width() {
        let without_iface: Vec<Column> = Column::ALL
            .into_iter()
            .filter(|c| *c != Column::Iface && *c != Column::Workload)
            .collect();
        let with_iface: Vec<Column> = Column::ALL
            .into_iter()
            .filter(|c| *c != Column::Workload)
            .collect();
        assert_eq!(columns_for(200, 21, true, false), with_iface);
        assert_eq!(columns_for(230, 21, true, true), Column::ALL.to_vec());
        // The workload column comes right after the process.
        let w = columns_for(200, 15, false, true);
        let owner = w.iter().position(|c| *c == Column::Owner).unwrap();
        assert_eq!(w[owner + 1], Column::Workload);
        assert_eq!(columns_for(200, 21, false, false), without_iface);
        // With peers as short as the lab's (10.77.1.1:47678), 120 is enough
        // for all but the interface, which comes last.
        assert_eq!(columns_for(120, 15, false, false), without_iface);
        assert_eq!(columns_for(120, 15, true, false), without_iface);
        assert!(columns_for(131, 15, true, false).contains(&Column::Iface));
        // Wider peers drop the least wanted columns first.
        let cols = columns_for(120, 21, false, false);
        assert!(!cols.contains(&Column::Rank) && !cols.contains(&Column::State));
        assert!(cols.contains(&Column::Owner));
        assert_eq!(
            columns_for(60, 21, true, false),
            vec![Column::Peer, Column::LocalPort, Column::Tx, Column::Rtt]
        );
        for w in [0, 10, 40, 59, 61, 80, 100] {
            let cols = columns_for(w, 47, true, false);
            let used: u16 = cols.iter().map(|c| c.width(47)).sum::<u16>()
                + COLUMN_SPACING * (cols.len() as u16).saturating_sub(1);
            assert!(used <= w, "{w}: {cols:?}");
        }
        // An IPv6 peer widens its column, and fewer others fit.
        let v6 = "[2001:db8:aaaa:bbbb:cccc:dddd:eeee:1]:40000";
        assert_eq!(peer_width([v6, "10.0.0.1:1"].into_iter()), 43);
        assert_eq!(peer_width(std::iter::empty()), 15);
        assert!(columns_for(120, 42, false, false).len() < without_iface.len());
    }
}

// The bitemporal picture of one entity: valid time across, transaction time up. Each
// version is a rectangle from valid_from to valid_to (open: to the right edge) and from
// recorded_at to retracted_at (or now); retracted versions hatched, gaps shaded.
import { s, when } from "./dom.js";

const W = 1000;
const H = 300;
const M = { left: 112, right: 16, top: 26, bottom: 36 };
const COLORS = ["#2f6fb1", "#3b9a57", "#b4662a", "#7a4fb5", "#1d8a8a", "#a8456e"];

const ms = (iso) => new Date(iso).getTime();

function ticks(lo, hi, n) {
  const out = [];
  for (let i = 0; i <= n; i++) out.push(lo + ((hi - lo) * i) / n);
  return out;
}

const DAY = 86400000;

// the wall clock in `tz` at instant t: [year, month (1-12), day, hour, minute]
function wall(t, tz) {
  const parts = {};
  const fmt = new Intl.DateTimeFormat("en-CA", {
    timeZone: tz, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
  });
  for (const p of fmt.formatToParts(new Date(t))) parts[p.type] = +p.value;
  return [parts.year, parts.month, parts.day, parts.hour, parts.minute];
}

// the instant of 00:00 (plus `hour`) of a calendar day in `tz` (months may overflow)
function localTime(year, month, day, tz, hour = 0) {
  const guess = Date.UTC(year, month - 1, day, hour);
  const offset = (t) => {
    const [y, mo, d, hh, mi] = wall(t, tz);
    return Date.UTC(y, mo - 1, d, hh, mi) - t;
  };
  return guess - offset(guess - offset(guess));
}

const pad = (n) => String(n).padStart(2, "0");

// valid-time ticks on calendar boundaries of the source's timezone, so that a gap (which
// starts at a local midnight) starts exactly at its day's tick: hours for a span under
// two days, days under ~60 days, months above; at most about 10 labels
export function validTicks(lo, hi, tz) {
  const span = hi - lo;
  const [y, m, d] = wall(lo, tz);
  const out = [];
  if (span < 2 * DAY) {
    const step = [1, 2, 3, 6, 12].find((n) => span / (n * 3600000) <= 10) || 12;
    for (let k = 0; k <= 48 / step + 1; k++) {
      const t = localTime(y, m, d, tz, k * step);
      if (t >= lo && t <= hi) {
        const [, mo, dd, hh, mi] = wall(t, tz);
        out.push({ t, label: `${pad(mo)}-${pad(dd)} ${pad(hh)}:${pad(mi)}` });
      }
    }
  } else if (span < 60 * DAY) {
    const step = [1, 2, 3, 7, 14].find((n) => span / (n * DAY) <= 10) || 14;
    for (let k = 0; k <= span / DAY + 2; k += step) {
      const t = localTime(y, m, d + k, tz);
      if (t >= lo && t <= hi) {
        const [yy, mo, dd] = wall(t, tz);
        out.push({ t, label: `${yy}-${pad(mo)}-${pad(dd)}` });
      }
    }
  } else {
    const months = span / (30.44 * DAY);
    const step = [1, 2, 3, 6, 12, 24, 60].find((n) => months / n <= 10) || 120;
    const first = Math.ceil(m / step) * step - step + 1; // a month the step divides
    for (let k = 0; k <= months + step + 1; k += step) {
      const t = localTime(y, first + k, 1, tz);
      if (t >= lo && t <= hi) {
        const [yy, mo] = wall(t, tz);
        out.push({ t, label: `${yy}-${pad(mo)}` });
      }
    }
  }
  return out;
}

export function timeline(versions, gaps, knownAt, timezone = "UTC") {
  const now = knownAt ? ms(knownAt) : Date.now();
  const starts = versions.map((v) => ms(v.valid_from));
  const ends = versions.filter((v) => v.valid_to).map((v) => ms(v.valid_to));
  const gapTimes = gaps.flatMap((g) => [ms(g.start), ms(g.end)]);
  let x0 = Math.min(...starts, ...gapTimes);
  let x1 = Math.max(...starts, ...ends, ...gapTimes);
  const span = Math.max(x1 - x0, 86400000);
  x0 -= span * 0.03;
  x1 += span * 0.18; // room for the open-ended (current) version
  const recorded = versions.map((v) => ms(v.recorded_at));
  const retracted = versions.filter((v) => v.retracted_at).map((v) => ms(v.retracted_at));
  const y0raw = Math.min(...recorded);
  const y1raw = Math.max(now, ...recorded, ...retracted);
  const ySpan = Math.max(y1raw - y0raw, 1000);
  const y0 = y0raw - ySpan * 0.04;
  const y1 = y1raw + ySpan * 0.04;
  const X = (t) => M.left + ((t - x0) / (x1 - x0)) * (W - M.left - M.right);
  const Y = (t) => H - M.bottom - ((t - y0) / (y1 - y0)) * (H - M.top - M.bottom);

  const svg = s("svg", {
    class: "timeline",
    id: "timeline",
    viewBox: `0 0 ${W} ${H}`,
    role: "img",
    "aria-labelledby": "timeline-title",
  });
  svg.append(
    s("title", { id: "timeline-title" }, `${versions.length} versions: valid time across, transaction time up`),
    s(
      "defs",
      {},
      s(
        "pattern",
        { id: "hatch", width: 7, height: 7, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
        s("rect", { width: 7, height: 7, fill: "#eaeef2" }),
        s("line", { x1: 0, y1: 0, x2: 0, y2: 7, stroke: "#6e7781", "stroke-width": 3 }),
      ),
    ),
  );
  // axes and their ticks
  svg.append(
    s("line", { class: "axis", x1: M.left, y1: H - M.bottom, x2: W - M.right, y2: H - M.bottom }),
    s("line", { class: "axis", x1: M.left, y1: M.top, x2: M.left, y2: H - M.bottom }),
    s("text", { x: W - M.right, y: H - 4, "text-anchor": "end" }, "valid time →"),
    s("text", { x: 4, y: 14 }, "transaction time ↑"),
  );
  for (const { t, label } of validTicks(x0, x1, timezone)) {
    svg.append(
      s("line", { class: "axis valid-tick", x1: X(t), y1: H - M.bottom, x2: X(t), y2: H - M.bottom + 4, dataset: { t: new Date(t).toISOString() } }),
      s("text", { class: "valid-label", x: X(t), y: H - M.bottom + 16, "text-anchor": "middle" }, label),
    );
  }
  for (const t of ticks(y0raw, y1raw, 3)) {
    svg.append(
      s("line", { class: "axis", x1: M.left - 4, y1: Y(t), x2: M.left, y2: Y(t) }),
      s("text", { x: M.left - 6, y: Y(t) + 4, "text-anchor": "end" }, when(new Date(t).toISOString()).slice(5)),
    );
  }
  versions.forEach((v, i) => {
    const a = X(ms(v.valid_from));
    const b = v.valid_to ? X(ms(v.valid_to)) : W - M.right;
    const top = Y(v.retracted_at ? ms(v.retracted_at) : now);
    const bottom = Y(ms(v.recorded_at));
    const classes = ["version", v.deleted ? "tombstone" : "", v.retracted_at ? "retracted" : ""].filter(Boolean).join(" ");
    const label = `version ${i + 1}: valid ${when(v.valid_from)} – ${v.valid_to ? when(v.valid_to) : "now"}, recorded ${when(v.recorded_at)}${v.retracted_at ? `, retracted ${when(v.retracted_at)}` : ""}${v.deleted ? " (deleted)" : ""}`;
    const rect = s(
      "rect",
      {
        class: classes,
        x: a,
        y: Math.min(top, bottom - 3),
        width: Math.max(b - a - 1, 2),
        height: Math.max(bottom - top, 3),
        fill: v.retracted_at ? "url(#hatch)" : v.deleted ? "#6e7781" : COLORS[i % COLORS.length],
        "fill-opacity": v.retracted_at ? 1 : 0.8,
        tabindex: 0,
        dataset: { versionId: String(i + 1), run: v.run_id },
      },
      s("title", {}, label),
    );
    const show = () => {
      const row = document.getElementById(`version-${i + 1}`);
      if (row) {
        row.scrollIntoView({ block: "center" });
        row.focus();
      }
    };
    rect.addEventListener("click", show);
    rect.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        show();
      }
    });
    rect.setAttribute("role", "button");
    rect.setAttribute("aria-label", label);
    svg.append(rect);
    if (b - a > 40) {
      svg.append(s("text", { x: a + 4, y: Math.min(top, bottom - 3) + 13, "pointer-events": "none" }, `v${i + 1}`));
    }
  });
  // gaps over the versions: inside one, asof answers "not observed"
  for (const g of gaps) {
    const a = X(ms(g.start));
    const b = X(ms(g.end));
    svg.append(
      s("rect", { class: "gap", x: a, y: M.top, width: Math.max(b - a, 2), height: H - M.top - M.bottom }, s("title", {}, `gap ${when(g.start)} – ${when(g.end)}: ${g.reason}`)),
    );
  }
  if (knownAt) {
    svg.append(
      s("line", { x1: M.left, x2: W - M.right, y1: Y(now), y2: Y(now), stroke: "#cf222e", "stroke-dasharray": "4 3" }),
      s("text", { x: W - M.right - 4, y: Y(now) - 4, "text-anchor": "end" }, `known at ${when(knownAt)}`),
    );
  }
  return svg;
}

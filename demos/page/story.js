// fencekit-demo --serve's page: one scenario told live, in the lanes of the static timeline
// (fencekit-demo --html): Client A, Client B, the lock service and the store. It reads GET
// /events (Server-Sent Events, demos/story_log.h): a hello naming the lanes (the page starts
// over on it, so a reload or a reconnection is replayed everything), each step as it happens,
// the outcome, then the visitor's own writes. Text from the feed is only ever inserted with
// textContent or as an attribute value, never as markup.
'use strict';

(() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const MAX_STEPS = 1000;      // kept and drawn (a replay sends at most 756); older ones go
  const LEFT = 8;              // lane lines start here; their titles stay in view beside
  const RIGHT = 16;
  const TOP = 56;              // the time axis sits above this
  const ROW = 16;              // one row of labels
  const GAP = 10;              // between two labels of a row
  const MIN_STEP = 48;         // two moments are at least this far apart (before scaling) ...
  const PX_PER_SQRT_MS = 12;   // ... and a wait is wider the longer it is, by its square root
  const MAX_WAIT = 720;        // the widest wait in the scenario (3 s) ...
  const MAX_WAIT_AFTER = 160;  // ... and between the visitor's writes
  const MAX_SCALE = 1.3;       // a short story is stretched at most this much to fill the width
  const MIN_SCALE = 0.5;       // a long one is scrolled rather than squeezed more
  const KINDS = new Set(['note', 'grant', 'expire', 'pause', 'resume', 'send', 'arrive',
                         'accepted', 'overwrite', 'refused', 'read', 'lost', 'restart']);
  // Of the marks of one lane at one moment, the one drawn (the others keep their title).
  const PRIORITY = ['overwrite', 'refused', 'accepted', 'lost', 'expire', 'restart', 'grant',
                    'pause', 'resume', 'send', 'arrive', 'read', 'note'];
  // An accepted write that overwrote a newer one (harm) is orange-red, not green.
  const COLOURS = {accepted: '#2a9d2a', overwrite: '#e8590c', refused: '#d62728',
                   lost: '#d62728', grant: '#1f77b4', expire: '#1f77b4', restart: '#1f77b4',
                   pause: '#e08000', resume: '#e08000', send: '#e08000', arrive: '#e08000'};
  // The record is a balance: A deposits 10 and B 20, each adding to what it read.
  const LEDES = {
    'gc-pause': 'Client A takes the lock, reads the balance and computes its deposit, then is ' +
        'frozen (SIGSTOP, as a long garbage-collection pause would freeze it) for longer than ' +
        'its lease. The lock service, working as specified, gives the lock to B, who reads and ' +
        'writes. Then A wakes up, still believing it holds the lock, and writes what it ' +
        'computed from the old balance, with its old token.',
    'slow-network': 'Client A takes the lock, reads the balance and sends its write, which a ' +
        'delaying proxy holds in the network past A\'s lease. B takes the lock, reads and ' +
        'writes; then A\'s old write arrives.',
    'lock-service-restart': 'A holds the lock and writes; Redis restarts without its data and ' +
        'grants the lock to B as well: two holders at once. The restarted Redis is a new lock ' +
        'service, and the store can tell.',
    'clock-jump': 'Redlock on five Redis nodes: A holds nodes 1-3 (it asked them one at a ' +
        'time and stopped at a majority). The demo deletes A\'s key on node 3, as node 3\'s ' +
        'clock jumping forward would expire it, and B wins nodes 3-5: two holders at once.',
    'check-then-write': 'A store that checks the token, then writes, in two steps. A\'s check ' +
        'passes; A is frozen between its check and its write, past its lease; B takes the lock, ' +
        'checks and writes. Then A\'s write comes, and nothing checks it again.',
  };

  let about = null;    // the hello: scenario, fencing, lanes, state
  let steps = [];
  let outcome = null;  // the end
  let zero = 0;        // performance.now() at the scenario's time 0
  let ticker = null;
  let drawPending = false;
  const widths = new Map();  // a text's width in px, by class and text

  const $ = (id) => document.getElementById(id);
  const svg = $('story');
  const titles = $('titles');

  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setStatus(state, text) {
    $('status').dataset.state = state;
    $('status').textContent = text;
  }

  const ms = (n) => Math.round(n).toLocaleString('en-US') + ' ms';
  const duration = (n) => n < 1000 ? ms(n) : (n / 1000).toFixed(2) + ' s';
  const running = () => about !== null && about.state === 'running' && outcome === null;
  const now = () => performance.now() - zero;

  function waitWidth(wait, after) {
    if (wait <= 0) return 0;
    const w = MIN_STEP + PX_PER_SQRT_MS * Math.sqrt(wait);
    return Math.min(w, after ? MAX_WAIT_AFTER : MAX_WAIT);
  }

  function textWidth(text, cls) {
    const key = cls + '\n' + text;
    let w = widths.get(key);
    if (w === undefined) {
      const t = el('text', {class: cls, x: 0, y: -50}, text);
      svg.appendChild(t);
      w = t.getComputedTextLength();
      svg.removeChild(t);
      if (widths.size > 4 * MAX_STEPS) widths.clear();
      widths.set(key, w);
    }
    return w;
  }

  // The lowest row (of at most `max`) where [from, to) keeps GAP from every span there; -1 when
  // none has room.
  function place(rows, from, to, max) {
    let r = 0;
    while (r < rows.length && rows[r].some(([a, b]) => from < b + GAP && a < to + GAP)) ++r;
    if (r >= max) return -1;
    if (r === rows.length) rows.push([]);
    rows[r].push([from, to]);
    return r;
  }

  // Where everything goes: one x per moment (the distinct times), the axis running on to now
  // while the scenario does, scaled to the window's width.
  function layOut() {
    const width = Math.max(640, $('scroller').clientWidth);
    const times = [];
    const moment = [];
    let firstAfter = Infinity;
    let lastInScenario = -1;
    for (const s of steps) {
      if (times.length === 0 || times[times.length - 1] !== s.t) times.push(s.t);
      moment.push(times.length - 1);
      if (s.after) firstAfter = Math.min(firstAfter, times.length - 1);
      else lastInScenario = times.length - 1;
    }
    const natural = times.map(() => 0);
    for (let i = 1; i < times.length; ++i) {
      natural[i] = natural[i - 1] + waitWidth(times[i] - times[i - 1], i >= firstAfter);
    }
    const last = times.length ? times[times.length - 1] : 0;
    const lastX = times.length ? natural[times.length - 1] : 0;
    const live = running();
    const tNow = live ? Math.max(now(), last) : last;
    const nowNatural = live ? lastX + waitWidth(tNow - last, false) : lastX;
    const x0 = LEFT + 24;
    const scale = Math.min(MAX_SCALE,
                           Math.max(MIN_SCALE, (width - x0 - RIGHT - 40) / Math.max(1, nowNatural)));
    const xs = natural.map((n) => x0 + n * scale);
    const xNow = x0 + nowNatural * scale;
    return {width: Math.max(width, xNow + RIGHT + 40), times, moment, xs, live, tNow, xNow,
            xEnd: live ? xNow : lastInScenario >= 0 ? xs[lastInScenario] : xNow};
  }

  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    while (titles.firstChild) titles.removeChild(titles.firstChild);
    if (about === null) return;
    // What the drawing shows, for whoever checks it: its state and how many steps.
    svg.dataset.state = outcome !== null ? 'ended' : about.state;
    svg.dataset.steps = steps.length;
    const L = layOut();
    // Labels in rows above their lane's line, never overlapping; the lane as tall as they need.
    // Placed latest first, so that labels that must stack read top-down in time order (the
    // earlier above); drawn in time order.
    const lanes = new Map(about.lanes.map((l) => [l.id, {...l, rows: [], labels: []}]));
    const placed = new Array(steps.length);
    for (let i = steps.length - 1; i >= 0; --i) {
      const s = steps[i];
      const x = L.xs[L.moment[i]];
      const w = textWidth(s.label, 'label');
      const end = x - 4 + w > L.width - RIGHT;
      const from = end ? x + 4 - w : x - 4;
      placed[i] = {i, x, end, row: place(lanes.get(s.lane).rows, from, from + w, Infinity)};
    }
    steps.forEach((s, i) => lanes.get(s.lane).labels.push(placed[i]));
    let y = TOP + 6;
    for (const lane of lanes.values()) {
      lane.client = lane.client === true || lane.id === 'A' || lane.id === 'B';
      lane.lineY = y + Math.max(1, lane.rows.length) * ROW + 12;
      y = lane.lineY + (lane.client ? 58 : 22);
    }
    const height = y + 6;
    svg.setAttribute('width', Math.ceil(L.width));
    svg.setAttribute('height', height);
    titles.setAttribute('height', height);
    drawAxis(L, height);
    for (const lane of lanes.values()) {
      titles.appendChild(el('text', {'class': 'lane-title', 'x': 8, 'y': lane.lineY + 4,
                                     'data-lane': lane.id}, lane.title));
      svg.appendChild(el('line', {class: 'lane-line', x1: LEFT, y1: lane.lineY,
                                  x2: L.width - RIGHT, y2: lane.lineY}));
    }
    drawBars(L, lanes);
    const shown = new Map();  // lane and moment: the step whose mark is drawn
    steps.forEach((s, i) => {
      const key = s.lane + '\n' + L.moment[i];
      const j = shown.get(key);
      if (j === undefined || PRIORITY.indexOf(s.kind) < PRIORITY.indexOf(steps[j].kind)) {
        shown.set(key, i);
      }
    });
    for (const lane of lanes.values()) {
      for (const {i, x, end, row} of lane.labels) {
        const s = steps[i];
        svg.appendChild(mark(s, x, lane.lineY, shown.get(s.lane + '\n' + L.moment[i]) === i));
        svg.appendChild(el('text', {
          'class': 'label kind-' + s.kind + (s.after ? ' after' : ''), 'data-id': s.id,
          'data-lane': s.lane, 'x': end ? x + 4 : x - 4, 'y': lane.lineY - 12 - row * ROW,
          'text-anchor': end ? 'end' : 'start'}, s.label));
      }
    }
    if (L.live) {
      svg.appendChild(el('line', {class: 'now', x1: L.xNow, y1: TOP - 4, x2: L.xNow,
                                  y2: height - 4}));
    }
  }

  // The axis: each moment's time (in two rows at most; a mark's title tells the rest), a
  // faint line down through the lanes, and the length of each long wait.
  function drawAxis(L, height) {
    svg.appendChild(el('line', {class: 'axis', x1: LEFT, y1: TOP - 4, x2: L.width - RIGHT,
                                y2: TOP - 4}));
    const rows = [];
    L.times.forEach((t, m) => {
      const x = L.xs[m];
      svg.appendChild(el('line', {class: 'moment', x1: x, y1: TOP - 4, x2: x, y2: height - 4}));
      const text = ms(t);
      const w = textWidth(text, 'tick');
      const row = place(rows, x - w / 2, x + w / 2, 2);
      if (row >= 0) {
        svg.appendChild(el('text', {'class': 'tick', 'x': x, 'y': TOP - 8 - row * 12,
                                    'text-anchor': 'middle'}, text));
      }
    });
    const waits = L.times.map((t, m) => [L.xs[m], t]);
    if (L.live) waits.push([L.xNow, L.tNow]);
    for (let m = 1; m < waits.length; ++m) {
      const [x1, t1] = waits[m - 1];
      const [x2, t2] = waits[m];
      const text = duration(t2 - t1) + ' later';
      if (t2 - t1 >= 100 && textWidth(text, 'gap') + 8 < x2 - x1) {
        svg.appendChild(el('text', {'class': 'gap', 'x': (x1 + x2) / 2, 'y': TOP - 36,
                                    'text-anchor': 'middle'}, text));
      }
    }
  }

  // Under each client's line: its lease from the grant to the lock service's expiry of it
  // (then dashed, until the client learns it: it still believes it holds the lock), and its
  // pause (or its write held in the network) growing while it lasts.
  function drawBars(L, lanes) {
    const lease = new Map();   // client: {x, token}
    const expired = new Map(); // client: x
    const paused = new Map();  // client: {x, t, kind}
    const x = (i) => L.xs[L.moment[i]];
    const solid = (who, from, to, token) => {
      const y = lanes.get(who).lineY + 8;
      const r = el('rect', {class: 'lease', x: from, y, width: Math.max(2, to - from), height: 10});
      r.appendChild(el('title', {}, 'lease of ' + who + ', token ' + token));
      svg.appendChild(r);
      const text = 'lease, token ' + token;
      if (textWidth(text, 'bar-label') + 8 < to - from) {
        svg.appendChild(el('text', {class: 'bar-label', x: from + 4, y: y + 8}, text));
      }
    };
    const dashed = (who, from, to) => svg.appendChild(el('rect', {
      class: 'lease-expired', x: from, y: lanes.get(who).lineY + 9, width: Math.max(2, to - from),
      height: 8}));
    const held = (who, p, to, tEnd, open) => {
      const y = lanes.get(who).lineY + 24;
      const len = Math.max(0, tEnd - p.t);
      svg.appendChild(el('rect', {'class': 'pause', 'x': p.x, 'y': y,
                                  'width': Math.max(2, to - p.x), 'height': 12,
                                  'data-open': open, 'data-ms': Math.round(len)}));
      svg.appendChild(el('text', {class: 'pause-label', x: p.x + 2, y: y + 26},
                              (p.kind === 'pause' ? 'paused ' : 'held in the network ') +
                                  duration(len) + (open ? '\u2026' : '')));
    };
    steps.forEach((s, i) => {
      if (s.after) return;
      const client = lanes.get(s.lane).client;
      if (client && s.kind === 'grant') {
        if (expired.has(s.lane)) dashed(s.lane, expired.get(s.lane), x(i));
        expired.delete(s.lane);
        lease.set(s.lane, {x: x(i), token: s.token});
      } else if (s.kind === 'expire' && lease.has(s.holder)) {
        solid(s.holder, lease.get(s.holder).x, x(i), lease.get(s.holder).token);
        lease.delete(s.holder);
        expired.set(s.holder, x(i));
      } else if (client && s.kind === 'lost') {
        if (expired.has(s.lane)) dashed(s.lane, expired.get(s.lane), x(i));
        if (lease.has(s.lane)) solid(s.lane, lease.get(s.lane).x, x(i), lease.get(s.lane).token);
        expired.delete(s.lane);
        lease.delete(s.lane);
      } else if (client && (s.kind === 'pause' || s.kind === 'send') && !paused.has(s.lane)) {
        paused.set(s.lane, {x: x(i), t: s.t, kind: s.kind});
      } else if (client && s.kind === 'resume' && paused.has(s.lane)) {
        held(s.lane, paused.get(s.lane), x(i), s.t, false);
        paused.delete(s.lane);
      } else if (s.kind === 'arrive' && paused.has(s.holder) && lanes.has(s.holder)) {
        // A held write reaches the store: its hold on the sender's lane ends.
        held(s.holder, paused.get(s.holder), x(i), s.t, false);
        paused.delete(s.holder);
      }
    });
    for (const [who, l] of lease) solid(who, l.x, L.xEnd, l.token);
    for (const [who, from] of expired) dashed(who, from, L.xEnd);
    for (const [who, p] of paused) held(who, p, L.xEnd, L.live ? L.tNow : p.t, L.live);
  }

  // A step's mark: its shape when `drawn` (one per lane and moment), and its title.
  function mark(s, x, y, drawn) {
    const g = el('g', {'class': 'mark kind-' + s.kind + (s.after ? ' after' : ''),
                       'data-id': s.id, 'data-lane': s.lane, 'data-t': s.t, 'data-x': x});
    const colour = COLOURS[s.kind] || '#777';
    if (!drawn) {
      // under the one drawn
    } else if (s.kind === 'refused') {
      for (const [a, b] of [[-6, 6], [6, -6]]) {
        g.appendChild(el('line', {x1: x + a, y1: y - 6, x2: x + b, y2: y + 6, stroke: colour,
                                  'stroke-width': 3}));
      }
    } else if (s.kind === 'expire' || s.kind === 'lost') {
      g.appendChild(el('circle', {cx: x, cy: y, r: 5, fill: '#fff', stroke: colour,
                                  'stroke-width': 2.5}));
    } else {
      g.appendChild(el('circle', {cx: x, cy: y, r: 6, fill: colour, stroke: '#fff',
                                  'stroke-width': 1.5}));
    }
    g.appendChild(el('title', {}, s.label + ' (at ' + ms(s.t) + ')'));
    return g;
  }

  function draw() {
    drawPending = false;
    const scroller = $('scroller');
    const atEnd = scroller.scrollLeft + scroller.clientWidth >= scroller.scrollWidth - 20;
    render();
    if (atEnd) scroller.scrollLeft = scroller.scrollWidth;
  }

  function schedule() {
    if (drawPending) return;
    drawPending = true;
    setTimeout(draw, 30);
  }

  // While the scenario runs the axis reaches to now: redrawn ten times a second.
  function tick() {
    if (running() && ticker === null) ticker = setInterval(schedule, 100);
    if (!running() && ticker !== null) {
      clearInterval(ticker);
      ticker = null;
    }
  }

  function showState() {
    if (about === null) return;
    if (outcome !== null) {
      setStatus('ended', outcome.store_url
                             ? 'The scenario is over. fenced keeps running: your own writes ' +
                                   'appear on the Storage lane as they are decided.'
                             : 'The scenario is over.');
    } else if (about.state === 'running') {
      setStatus('running', 'Live: the scenario is running.');
    } else {
      setStatus('waiting', 'Waiting for the scenario to start (it starts once a page is open).');
    }
  }

  function onHello(h) {
    if (!h || typeof h.scenario !== 'string' || typeof h.fencing !== 'boolean' ||
        typeof h.now_ms !== 'number' || typeof h.state !== 'string' || !Array.isArray(h.lanes) ||
        h.lanes.length > 8 ||
        !h.lanes.every((l) => l && typeof l.id === 'string' && typeof l.title === 'string')) {
      return;
    }
    about = h;
    steps = [];
    outcome = null;
    zero = performance.now() - h.now_ms;
    $('scenario').textContent = h.scenario + (h.fencing ? ' (fencing on)' : ' (fencing OFF)');
    document.title = 'fencekit demo: ' + h.scenario;
    $('lede').textContent = LEDES[h.scenario] || $('lede').textContent;
    $('banner').hidden = h.fencing;
    $('banner').textContent = h.fencing ? '' :
        'Fencing is OFF in this run (--no-fencing): the store accepts every write, whatever its ' +
        'token, so a client whose lease ran out can overwrite a newer write: the lost update ' +
        'that fencing prevents.';
    $('verdict').hidden = true;
    $('try').hidden = true;
    $('forgotten').hidden = true;
    showState();
    tick();
    schedule();
  }

  function onStep(s) {
    if (about === null || !s || typeof s.id !== 'number' || typeof s.t !== 'number' ||
        typeof s.label !== 'string' || !about.lanes.some((l) => l.id === s.lane) ||
        !(s.token === null || typeof s.token === 'number')) {
      return;
    }
    s.kind = KINDS.has(s.kind) ? s.kind : 'note';
    s.after = s.after === true;
    steps.push(s);
    if (steps.length > MAX_STEPS) steps.splice(0, steps.length - MAX_STEPS);
    if (s.after) showVerdict();
    schedule();
  }

  function onEnd(o) {
    if (about === null || !o || typeof o.verdict !== 'string' ||
        typeof o.final_value !== 'string' || typeof o.highest !== 'number' ||
        typeof o.store_url !== 'string' || typeof o.lock !== 'string' ||
        typeof o.key !== 'string') {
      return;
    }
    outcome = o;
    showVerdict();
    if (o.store_url !== '') {
      const put = (token) => "curl -i -X PUT -H 'Fencing-Lock: " + o.lock +
          "' -H 'Fencing-Token: " + token + "' --data mine " + o.store_url + '/v1/objects/' + o.key;
      const high = o.highest + 5;
      $('commands').textContent =
          '# accepted: token ' + high + ' is at least the highest so far (' + o.highest + ')\n' +
          put(high) + '\n' +
          (about.fencing ? '# refused: token 1 is below it (409 stale_token)\n'
                         : '# accepted too: this store does not check tokens ' +
                               '(with fencing: 409 stale_token)\n') +
          put(1) + '\n';
      $('try').hidden = false;
    }
    showState();
    tick();
    schedule();
  }

  // The scenario's verdict, and what the visitor's own writes did since: the record holds
  // the scenario's final value only until one of them is accepted.
  function showVerdict() {
    if (outcome === null) return;
    const v = $('verdict');
    v.hidden = false;
    v.dataset.ok = String(outcome.lesson_shown === true && about.fencing);
    // The visitor's writes to the scenario's record (a write to another key leaves it be).
    const mine = steps.filter((s) => s.after && s.lane === 'store' &&
                                     s.label.includes(' a write to ' + outcome.key + ', '));
    const accepted = mine.filter((s) => s.kind === 'accepted' || s.kind === 'overwrite');
    const refused = mine.filter((s) => s.kind === 'refused').length;
    let text = 'Verdict: ' + outcome.verdict + '. ';
    if (mine.length === 0) {
      text += 'The record now holds "' + outcome.final_value + '".';
    } else {
      text += 'At the end of the scenario the record held "' + outcome.final_value + '". ' +
          'Since then, your own writes: ' + accepted.length + ' accepted, ' + refused +
          ' refused' + (accepted.length > 0
              ? '; the record now holds your latest accepted one (token ' +
                    accepted[accepted.length - 1].token + ').'
              : ', so it still holds that value.');
    }
    v.textContent = text;
  }

  function onForgotten(f) {
    if (!f || typeof f.writes !== 'number') return;
    $('forgotten').hidden = false;
    $('forgotten').textContent = f.writes + ' earlier write(s) of visitors are not shown: the ' +
        'demo keeps the latest 500.';
  }

  function parsed(handler) {
    return (m) => {
      let v;
      try {
        v = JSON.parse(m.data);
      } catch (e) {
        return;
      }
      handler(v);
    };
  }

  function connect() {
    const source = new EventSource('/events');
    source.addEventListener('hello', parsed(onHello));
    source.addEventListener('step', parsed(onStep));
    source.addEventListener('end', parsed(onEnd));
    source.addEventListener('forgotten', parsed(onForgotten));
    source.onerror = () => {
      setStatus('retrying', 'fencekit-demo does not answer (stopped?); trying again.');
      // It reconnects by itself, except after a refusal (too many pages open).
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 5000);
    };
  }

  window.addEventListener('resize', schedule);
  connect();
})();

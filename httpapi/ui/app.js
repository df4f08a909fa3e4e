// The live timeline of fenced: reads GET /v1/events (Server-Sent Events) and draws one lane per
// lock holder (lock and fencing token) with every accepted and refused write. Text from the
// feed is only ever inserted with textContent or as an attribute value, never as markup.
'use strict';

(() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const MAX_EVENTS = 1000;        // kept and drawn; older ones are forgotten
  const MAX_ROWS = 200;           // of the decisions table
  const MAX_BUFFER = 1 << 20;     // an event stream line longer than this ends the connection
  const LEFT = 250;               // lane labels sit left of this
  const TOP = 34;                 // the time axis sits above this
  const PX_PER_MS = 0.2;          // time-proportional: 1 s is 200 px ...
  const MIN_STEP = 36;            // ... but two marks are never closer than this
  const BREAK_MS = 3000;          // a longer wait is drawn as a break of BREAK_WIDTH
  const BREAK_WIDTH = 64;
  const LABEL_ROWS = 3;           // rows of key labels above a lane
  const CHAR_PX = 6.5;            // an upper estimate of a character's width at 11px

  const events = [];
  // The highest token accepted so far per lock (by name), to tell a fenced that does not check
  // tokens: one that accepts a token below an accepted one runs with --no-fencing (or an
  // administrator lowered the fence in between).
  const highestAccepted = new Map();
  let fencingOff = false;
  let bearer = null;   // typed by the user; kept in memory only
  let dropped = 0;
  let retryDelay = 1000;

  const $ = (id) => document.getElementById(id);
  const svg = $('timeline');

  function setStatus(state, text) {
    const s = $('status');
    s.dataset.state = state;
    s.textContent = text;
  }

  function svgEl(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function short(text, max) {
    return text.length <= max ? text : text.slice(0, max - 1) + '\u2026';
  }

  // A name as the feed sends it; percent-encoded when it is not UTF-8 (<field>_encoding).
  function nameOf(ev, field) {
    const v = typeof ev[field] === 'string' ? ev[field] : '';
    return ev[field + '_encoding'] === 'percent' ? v + ' (percent-encoded)' : v;
  }

  function clock(ms) {
    const d = new Date(ms);
    const pad = (n, w) => String(n).padStart(w, '0');
    return pad(d.getHours(), 2) + ':' + pad(d.getMinutes(), 2) + ':' + pad(d.getSeconds(), 2) +
        '.' + pad(d.getMilliseconds(), 3);
  }

  function seconds(ms) {
    return ms >= 10000 ? Math.round(ms / 1000) + ' s' : (ms / 1000).toFixed(1) + ' s';
  }

  // x of each event: proportional to time, at least MIN_STEP apart, long waits as breaks.
  function layOutTime() {
    const xs = [];
    const breaks = [];
    let x = LEFT + 30;
    for (let i = 0; i < events.length; ++i) {
      if (i > 0) {
        const gap = events[i].time_ms - events[i - 1].time_ms;
        if (gap > BREAK_MS) {
          breaks.push({from: x + MIN_STEP / 2, ms: gap});
          x += MIN_STEP + BREAK_WIDTH;
        } else {
          x += Math.max(MIN_STEP, gap * PX_PER_MS);
        }
      }
      xs.push(x);
    }
    return {xs, breaks, width: x + 200};
  }

  function laneKey(ev) { return JSON.stringify([nameOf(ev, 'lock'), ev.token]); }

  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const {xs, breaks, width} = layOutTime();
    // Lanes: one per (lock, token), by lock then token.
    const lanes = new Map();
    events.forEach((ev, i) => {
      const k = laneKey(ev);
      if (!lanes.has(k)) lanes.set(k, {lock: nameOf(ev, 'lock'), token: ev.token, marks: []});
      lanes.get(k).marks.push(i);
    });
    const ordered = [...lanes.values()].sort((a, b) =>
        a.lock < b.lock ? -1 : a.lock > b.lock ? 1 : a.token - b.token);
    // Key labels in rows above each lane, never overlapping: first row with room.
    let y = TOP;
    const placed = [];
    for (const lane of ordered) {
      const rowEnds = new Array(LABEL_ROWS).fill(-Infinity);
      const labels = [];
      for (const i of lane.marks) {
        const text = short(nameOf(events[i], 'key'), 24);
        const w = text.length * CHAR_PX;
        const left = xs[i] - 4;
        const row = rowEnds.findIndex((end) => end + 6 <= left);
        if (row < 0) continue;  // no room: the mark's tooltip still names it
        rowEnds[row] = left + w;
        labels.push({i, text, row});
      }
      const rows = Math.max(1, labels.reduce((m, l) => Math.max(m, l.row + 1), 0));
      const lineY = y + rows * 13 + 12;
      placed.push({lane, labels, lineY, top: y});
      y = lineY + 24;
    }
    const height = Math.max(80, y + 10);
    svg.setAttribute('width', Math.max(960, width));
    svg.setAttribute('height', height);

    for (const b of breaks) {
      svg.appendChild(svgEl('rect', {class: 'axis-break', x: b.from, y: 4, width: BREAK_WIDTH,
                                     height: height - 8}));
      svg.appendChild(svgEl('text', {class: 'break-label', x: b.from + BREAK_WIDTH / 2, y: 16,
                                     'text-anchor': 'middle'}, '\u2026 ' + seconds(b.ms) + ' \u2026'));
    }
    // Clock ticks: the first event and the first after each break.
    events.forEach((ev, i) => {
      if (i === 0 || ev.time_ms - events[i - 1].time_ms > BREAK_MS) {
        svg.appendChild(svgEl('text', {class: 'tick', x: xs[i], y: 28, 'text-anchor': 'middle'},
                              clock(ev.time_ms)));
      }
    });
    for (const {lane, labels, lineY} of placed) {
      const label = svgEl('text', {class: 'lane-label', x: 8, y: lineY + 4},
                          short('lock ' + lane.lock, 26) + ' \u00b7 token ' + lane.token);
      label.appendChild(svgEl('title', {}, 'lock ' + lane.lock + ', token ' + lane.token));
      svg.appendChild(label);
      svg.appendChild(svgEl('line', {class: 'lane-line', x1: LEFT, y1: lineY, x2: width - 20,
                                     y2: lineY}));
      for (const l of labels) {
        svg.appendChild(svgEl('text', {class: 'mark-label', x: xs[l.i] - 4,
                                       y: lineY - 12 - l.row * 13}, l.text));
      }
      for (const i of lane.marks) svg.appendChild(mark(events[i], xs[i], lineY));
    }
  }

  function describe(ev) {
    let d = ev.op + ' ' + nameOf(ev, 'key') + ' under lock ' + nameOf(ev, 'lock') +
        ' with token ' + ev.token + ': ' + ev.decision;
    if (ev.decision === 'refused') d += ' (' + ev.reason + ')';
    d += '; highest token now ' + ev.highest;
    if (ev.principal !== undefined) d += '; by ' + nameOf(ev, 'principal');
    return d + '; ' + clock(ev.time_ms);
  }

  function mark(ev, x, y) {
    const accepted = ev.decision === 'accepted';
    const g = svgEl('g', {class: 'mark ' + (accepted ? 'accepted' : 'refused'),
                          id: 'mark-' + ev.id});
    if (accepted) {
      g.appendChild(svgEl('circle', {cx: x, cy: y, r: 7, fill: '#2a9d2a'}));
    } else {
      const s = 6;
      for (const [dx1, dx2] of [[-s, s], [s, -s]]) {
        g.appendChild(svgEl('line', {x1: x + dx1, y1: y - s, x2: x + dx2, y2: y + s,
                                     stroke: '#d62728', 'stroke-width': 3}));
      }
    }
    g.appendChild(svgEl('title', {}, describe(ev)));
    return g;
  }

  function addRow(ev) {
    const tr = document.createElement('tr');
    tr.className = ev.decision;
    const cells = [clock(ev.time_ms), ev.op, nameOf(ev, 'lock'), ev.token, nameOf(ev, 'key'),
                   ev.decision === 'refused' ? 'refused: ' + ev.reason : 'accepted', ev.highest,
                   ev.principal === undefined ? '' : nameOf(ev, 'principal')];
    for (const c of cells) {
      const td = document.createElement('td');
      td.textContent = String(c);
      tr.appendChild(td);
    }
    const body = $('log').tBodies[0];
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
  }

  // Drawn at most every 100 ms, however fast decisions come.
  let drawPending = false;
  function draw() {
    drawPending = false;
    const scroller = $('scroller');
    const atEnd = scroller.scrollLeft + scroller.clientWidth >= scroller.scrollWidth - 20;
    render();
    if (atEnd) scroller.scrollLeft = scroller.scrollWidth;
    if ($('status').dataset.state === 'live') {
      setStatus('live', 'live: ' + events.length + ' decision(s) shown');
    }
  }

  function checkFencing(ev) {
    if (ev.decision !== 'accepted') return;
    const lock = nameOf(ev, 'lock');
    const before = highestAccepted.get(lock);
    highestAccepted.set(lock, Math.max(before === undefined ? 0 : before, ev.token));
    if (fencingOff || before === undefined || ev.token >= before) return;
    fencingOff = true;
    const f = $('fencing');
    f.hidden = false;
    f.textContent = 'Fencing is OFF on this fenced: it accepted token ' + ev.token +
        ' of lock ' + lock + ' after token ' + before + '. A store that does not check tokens ' +
        '(fenced --no-fencing, for demonstrations only) lets a paused client\'s stale write ' +
        'overwrite newer data: the lost update fencing prevents. (Or an administrator lowered ' +
        'the fence in between.)';
    $('try').textContent = tryText(false);
  }

  function onDecision(ev) {
    if (typeof ev !== 'object' || ev === null || typeof ev.id !== 'number' ||
        typeof ev.token !== 'number' || typeof ev.time_ms !== 'number') {
      return;
    }
    checkFencing(ev);
    events.push(ev);
    if (events.length > MAX_EVENTS) events.splice(0, events.length - MAX_EVENTS);
    addRow(ev);
    if (!drawPending) {
      drawPending = true;
      setTimeout(draw, 100);
    }
  }

  function onBlock(block) {
    let type = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;  // a heartbeat or comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') type = value;
      if (field === 'data') data.push(value);
    }
    if (data.length === 0) return;
    let parsed;
    try {
      parsed = JSON.parse(data.join('\n'));
    } catch (e) {
      return;
    }
    if (type === 'decision') onDecision(parsed);
    if (type === 'dropped' && typeof parsed.dropped === 'number') {
      dropped += parsed.dropped;
      const n = $('notice');
      n.hidden = false;
      n.textContent = dropped + ' decision(s) skipped: this page fell behind the feed.';
    }
  }

  function retry(why) {
    setStatus('retrying', why + '; reconnecting in ' + retryDelay / 1000 + ' s');
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 30000);
  }

  async function connect() {
    const headers = {Accept: 'text/event-stream'};
    if (bearer !== null) headers.Authorization = 'Bearer ' + bearer;
    let res;
    try {
      res = await fetch('/v1/events', {headers, cache: 'no-store'});
    } catch (e) {
      return retry('cannot reach fenced');
    }
    if (res.status === 401) {
      $('auth').hidden = false;
      setStatus('unauthorized', bearer === null ? 'this fenced needs a bearer token'
                                                : 'fenced does not know this token');
      return;
    }
    if (!res.ok) {
      let message = '';
      try {
        message = (await res.json()).message || '';
      } catch (e) { /* not JSON */ }
      return retry('fenced answered ' + res.status + (message ? ': ' + message : ''));
    }
    $('auth').hidden = true;
    retryDelay = 1000;
    setStatus('live', 'live: waiting for writes');
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          onBlock(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
        if (buffer.length > MAX_BUFFER) break;
      }
    } catch (e) { /* the connection broke */ }
    retry('the event feed ended');
  }

  $('auth').addEventListener('submit', (e) => {
    e.preventDefault();
    bearer = $('token').value.trim();
    connect();
  });
  // Writes to try with curl; `fencing` false once this fenced was seen not to check tokens.
  function tryText(fencing) {
    const base = location.origin;
    return '# an accepted write: token 7 is at least the highest token of lock demo-lock\n' +
        "curl -i -X PUT -H 'Fencing-Token: 7' -H 'Fencing-Lock: demo-lock' --data hello " +
        base + '/v1/objects/shared-record\n' +
        (fencing ? '# a refused one: token 3 is below it now\n'
                 : '# token 3 is below it, yet accepted too: fencing is off on this fenced\n') +
        "curl -i -X PUT -H 'Fencing-Token: 3' -H 'Fencing-Lock: demo-lock' --data stale " +
        base + '/v1/objects/shared-record\n' +
        '# under --auth, add -H "Authorization: Bearer $TOKEN"\n';
  }
  $('try').textContent = tryText(true);
  render();
  connect();
})();

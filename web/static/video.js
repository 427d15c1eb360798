// The console's picture, in the best way the browser and the daemon
// share: WebRTC (H.264, signalled by WHEP at /api/media/whep), else
// PiKVM's Direct H.264 over /api/media/ws decoded with WebCodecs, else
// ustreamer's MJPEG (/streamer/stream). A way that fails, or shows no
// picture within FIRST_FRAME, gives way to the next by itself; the
// player says which one it uses, its bitrate and its latency.
//
// WebRTC's latency is what the browser measures of it: half the round
// trip, the jitter buffer and decoding; Direct H.264's the time from a
// picture's arrival to its decoded frame. MJPEG's are not measured (an
// <img> tells neither).

const FIRST_FRAME = 6000; // ms for a way to show its first picture
const STATS_EVERY = 1000; // ms
const RETRY = 1000; // ms before a way that dropped is tried again
// Drops of one way tolerated before it gives way to the next.
const DROPS = 3;

/** MODES are the ways, best first. */
export const MODES = ['webrtc', 'media', 'mjpeg'];

/** modeName is a way's name for people. */
export function modeName(m) {
  return { webrtc: 'WebRTC', media: 'H.264 (WebCodecs)', mjpeg: 'MJPEG' }[m] || m;
}

/** supported says whether this browser has what a way needs. */
export function supported(m) {
  switch (m) {
    case 'webrtc': return typeof RTCPeerConnection === 'function';
    case 'media': return typeof VideoDecoder === 'function' && typeof EncodedVideoChunk === 'function';
  }
  return true;
}

/**
 * Player shows the picture in els.img (MJPEG), els.video (WebRTC) or
 * els.canvas (WebCodecs). onChange is called with the player when the way
 * or the figures change.
 */
export class Player {
  constructor(els, onChange) {
    this.els = els;
    this.onChange = onChange;
    this.mode = '';
    this.stats = { kbps: null, latency: null, fps: null };
    this.error = '';
    this.forced = ''; // a way asked for (?video=), kept whatever happens
    this.h264 = false;
    this.drops = 0;
    this.gen = 0; // bumped at every start: an old way's callbacks see it moved
    this.stopWay = null;
    this.statsTimer = 0;
  }

  /** setH264 says whether the daemon has H.264 (features.h264). */
  setH264(on) {
    if (this.h264 === on && this.mode) return;
    this.h264 = on;
    this.start(this.first());
  }

  /** force keeps to one way ('' for the automatic choice). */
  force(m) {
    this.forced = MODES.includes(m) ? m : '';
    this.drops = 0;
    this.start(this.first());
  }

  first() {
    if (this.forced) return this.forced;
    return MODES.find((m) => (m === 'mjpeg' || this.h264) && supported(m));
  }

  /** next is the way after m, for a failure of m. */
  next(m) {
    if (this.forced) return m;
    const rest = MODES.slice(MODES.indexOf(m) + 1);
    return rest.find((w) => (w === 'mjpeg' || this.h264) && supported(w)) || 'mjpeg';
  }

  /** element is the element that shows the picture. */
  element() {
    return { webrtc: this.els.video, media: this.els.canvas }[this.mode] || this.els.img;
  }

  /** size is the picture's own size, or null before one. */
  size() {
    const v = this.els.video;
    const c = this.els.canvas;
    const i = this.els.img;
    switch (this.mode) {
      case 'webrtc': return v.videoWidth ? { w: v.videoWidth, h: v.videoHeight } : null;
      case 'media': return c.width > 1 ? { w: c.width, h: c.height } : null;
    }
    return i.naturalWidth ? { w: i.naturalWidth, h: i.naturalHeight } : null;
  }

  changed() {
    this.onChange?.(this);
  }

  /** start stops the current way and starts m. */
  start(m) {
    this.stop();
    const gen = ++this.gen;
    this.mode = m;
    this.error = '';
    this.stats = { kbps: null, latency: null, fps: null };
    for (const [w, el] of [['mjpeg', this.els.img], ['webrtc', this.els.video], ['media', this.els.canvas]]) {
      el.hidden = w !== m;
    }
    this.els.screen.dataset.video = m;
    this.els.screen.dataset.frames = '';
    let over = false; // this start failed: later reports are of its end
    const shown = () => {
      if (gen !== this.gen || over) return;
      clearTimeout(timer);
      this.drops = 0;
      this.els.screen.dataset.frames = '1';
      this.changed();
    };
    const failed = (why) => {
      if (gen !== this.gen || over) return;
      over = true;
      clearTimeout(timer);
      this.drops++;
      this.error = modeName(m) + ': ' + why;
      const to = this.drops >= DROPS || !this.els.screen.dataset.frames ? this.next(m) : m;
      if (to !== m) this.drops = 0;
      this.stop();
      this.changed();
      setTimeout(() => { if (gen === this.gen) this.start(to); }, RETRY);
    };
    const timer = setTimeout(() => failed('no picture within ' + FIRST_FRAME / 1000 + ' s'), FIRST_FRAME);
    const way = { webrtc: startWebRTC, media: startMedia, mjpeg: startMJPEG }[m];
    this.stopWay = way(this, shown, failed);
    this.statsTimer = setInterval(() => this.stopWay?.stats?.(), STATS_EVERY);
    this.changed();
  }

  stop() {
    clearInterval(this.statsTimer);
    const s = this.stopWay;
    this.stopWay = null;
    s?.stop();
  }

  setStats(s) {
    this.stats = s;
    this.changed();
  }
}

// ---- MJPEG

function startMJPEG(p, shown, failed) {
  const img = p.els.img;
  const key = Math.random().toString(36).slice(2, 10);
  let q = '?key=' + key;
  // ustreamer's fixes of the browsers' MJPEG bugs, as PiKVM's page asks
  // for them (stream_mjpeg.js): Blink draws a frame only when the next
  // one's headers come; WebKit needs the last frame of a series twice.
  const ua = navigator.userAgent;
  if (/Chrome|Chromium|Edg\//.test(ua)) q += '&advance_headers=1';
  else if (/Safari/.test(ua)) q += '&dual_final_frames=1';
  const onLoad = () => shown();
  const onError = () => failed('the stream ended');
  img.addEventListener('load', onLoad);
  img.addEventListener('error', onError);
  img.src = '/streamer/stream' + q;
  return {
    stop() {
      img.removeEventListener('load', onLoad);
      img.removeEventListener('error', onError);
    },
    // An <img> tells neither bytes nor times.
    stats() {},
  };
}

// ---- WebRTC, signalled by WHEP

function startWebRTC(p, shown, failed) {
  const video = p.els.video;
  const pc = new RTCPeerConnection({ bundlePolicy: 'max-bundle' });
  let resource = ''; // the session's URL, for its DELETE
  let stopped = false;
  const fail = (why) => {
    if (!stopped) failed(why);
  };
  let last = null; // the last inbound-rtp stats
  const tr = pc.addTransceiver('video', { direction: 'recvonly' });
  // Show each picture as soon as it is decoded: a KVM's picture is never
  // smoothed at the price of its latency.
  if ('jitterBufferTarget' in tr.receiver) tr.receiver.jitterBufferTarget = 0;
  if ('playoutDelayHint' in tr.receiver) tr.receiver.playoutDelayHint = 0;
  pc.ontrack = (ev) => {
    video.srcObject = ev.streams[0] || new MediaStream([ev.track]);
    video.play().catch(() => {});
  };
  pc.onconnectionstatechange = () => {
    if (pc.connectionState === 'failed' || pc.connectionState === 'closed') fail('the connection ' + pc.connectionState);
  };
  const onFrame = () => {
    if (!stopped) shown();
  };
  video.addEventListener('loadeddata', onFrame, { once: true });

  (async () => {
    try {
      await pc.setLocalDescription(await pc.createOffer());
      // The daemon takes no trickled candidates: the offer goes with
      // those gathered within a moment (its own checks find the rest).
      await new Promise((resolve) => {
        if (pc.iceGatheringState === 'complete') return resolve();
        const t = setTimeout(resolve, 500);
        pc.addEventListener('icegatheringstatechange', () => {
          if (pc.iceGatheringState === 'complete') { clearTimeout(t); resolve(); }
        });
      });
      const res = await fetch('/api/media/whep', {
        method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp,
      });
      if (res.status !== 201) {
        let msg = 'HTTP ' + res.status;
        try { msg = (await res.json()).result.error_msg || msg; } catch { /* not JSON */ }
        throw new Error(msg);
      }
      resource = res.headers.get('Location') || '';
      const answer = await res.text();
      if (stopped) return end();
      await pc.setRemoteDescription({ type: 'answer', sdp: answer });
    } catch (e) {
      fail(e.message || String(e));
    }
  })();

  function end() {
    if (resource) {
      // keepalive: sent even while the page unloads.
      fetch(resource, { method: 'DELETE', credentials: 'same-origin', keepalive: true }).catch(() => {});
      resource = '';
    }
    pc.close();
  }
  return {
    stop() {
      stopped = true;
      video.removeEventListener('loadeddata', onFrame);
      video.srcObject = null;
      end();
    },
    async stats() {
      const r = await pc.getStats();
      let inb = null;
      let rtt = null;
      r.forEach((s) => {
        if (s.type === 'inbound-rtp' && s.kind === 'video') inb = s;
        if (s.type === 'candidate-pair' && s.state === 'succeeded' && s.nominated && s.currentRoundTripTime !== undefined) rtt = s.currentRoundTripTime;
      });
      if (!inb) return;
      const prev = last;
      last = inb;
      if (!prev) return;
      const dt = (inb.timestamp - prev.timestamp) / 1000;
      if (dt <= 0) return;
      const kbps = Math.round((inb.bytesReceived - prev.bytesReceived) * 8 / dt / 1000);
      const fps = Math.round((inb.framesDecoded - prev.framesDecoded) / dt);
      // The browser's share of the delay: the jitter buffer and decoding
      // of the last second's pictures, and half the round trip.
      const n = inb.jitterBufferEmittedCount - prev.jitterBufferEmittedCount;
      const jb = n > 0 ? (inb.jitterBufferDelay - prev.jitterBufferDelay) / n : 0;
      const nd = inb.framesDecoded - prev.framesDecoded;
      const dec = nd > 0 ? (inb.totalDecodeTime - prev.totalDecodeTime) / nd : 0;
      const latency = Math.round((jb + dec + (rtt ?? 0) / 2) * 1000);
      p.setStats({ kbps, latency, fps });
    },
  };
}

// ---- Direct H.264 over /api/media/ws, decoded by WebCodecs

function startMedia(p, shown, failed) {
  const canvas = p.els.canvas;
  const ctx = canvas.getContext('2d');
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/media/ws');
  ws.binaryType = 'arraybuffer';
  let dec = null;
  let stopped = false;
  let bytes = 0;
  let frames = 0;
  let lat = 0;
  let latN = 0;
  let since = performance.now();
  const arrived = new Map(); // a chunk's timestamp, to its arrival

  const fail = (why) => {
    if (!stopped) failed(why);
  };
  function decoder() {
    dec = new VideoDecoder({
      output: (frame) => {
        const t = arrived.get(frame.timestamp);
        arrived.delete(frame.timestamp);
        if (t !== undefined) {
          lat += performance.now() - t;
          latN++;
        }
        if (canvas.width !== frame.displayWidth || canvas.height !== frame.displayHeight) {
          canvas.width = frame.displayWidth;
          canvas.height = frame.displayHeight;
        }
        ctx.drawImage(frame, 0, 0);
        frame.close();
        frames++;
        shown();
      },
      error: (e) => fail('the decoder failed: ' + e.message),
    });
    // kvmd's avc1.42E01F: Constrained Baseline, the level the stream's
    // own SPS says.
    dec.configure({ codec: 'avc1.42E01F', optimizeForLatency: true });
  }
  let ts = 0;
  ws.onmessage = (ev) => {
    if (typeof ev.data === 'string') {
      let msg;
      try { msg = JSON.parse(ev.data); } catch { return; }
      if (msg.event_type === 'media') {
        if (!msg.event?.video?.h264) return fail('the daemon has no H.264');
        ws.send(JSON.stringify({ event_type: 'start', event: { type: 'video', format: 'h264' } }));
      }
      return;
    }
    const b = new Uint8Array(ev.data);
    if (b.length < 3 || b[0] !== 1) return; // a pong (255)
    const key = b[1] === 1;
    bytes += b.length;
    if (!dec || dec.state === 'closed') {
      if (!key) return;
      decoder();
    }
    ts += 1000;
    arrived.set(ts, performance.now());
    if (arrived.size > 120) arrived.delete(arrived.keys().next().value);
    try {
      dec.decode(new EncodedVideoChunk({ type: key ? 'key' : 'delta', timestamp: ts, data: b.subarray(2) }));
    } catch (e) {
      // A delta after a decoder error: ask for a key frame and start over.
      dec.close();
      dec = null;
      if (ws.readyState === WebSocket.OPEN) ws.send(new Uint8Array([1]));
    }
  };
  ws.onclose = () => fail('the WebSocket closed');
  ws.onerror = () => fail('the WebSocket failed');
  return {
    stop() {
      stopped = true;
      ws.onclose = null;
      ws.close();
      if (dec && dec.state !== 'closed') dec.close();
    },
    stats() {
      const now = performance.now();
      const dt = (now - since) / 1000;
      since = now;
      p.setStats({
        kbps: Math.round(bytes * 8 / dt / 1000),
        latency: latN ? Math.round(lat / latN) : null,
        fps: Math.round(frames / dt),
      });
      bytes = frames = lat = latN = 0;
    },
  };
}

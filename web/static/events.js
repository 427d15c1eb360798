// The page's event stream: kvmd's /api/ws without the video (stream=0),
// one WebSocket shared by the cards of a page. It starts with every
// subsystem's state (the server's greeting), then brings each change. The
// dashboard's cards once opened one each: three greetings for the server
// to make and the browser to read on every load, and three of the
// WebSockets a user may hold at once (--max-websockets-per-user).

const STREAM_RECONNECT = 2000; // ms before a dropped stream is opened again

const streamHandlers = new Map(); // event_type → functions of the event
const streamClosed = []; // functions called when the stream drops
let streamStarted = false;

/**
 * onEvent calls fn with each event of type: the state in the greeting,
 * then every change, again from a greeting after a reconnection. The
 * stream opens with the first call.
 */
export function onEvent(type, fn) {
  if (!streamHandlers.has(type)) streamHandlers.set(type, []);
  streamHandlers.get(type).push(fn);
  if (!streamStarted) {
    streamStarted = true;
    streamConnect();
  }
}

/** onStreamClosed calls fn each time the stream drops, before it is opened again. */
export function onStreamClosed(fn) {
  streamClosed.push(fn);
}

function streamConnect() {
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/ws?stream=0');
  ws.onmessage = (ev) => {
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      return;
    }
    const fns = msg && msg.event ? streamHandlers.get(msg.event_type) : undefined;
    for (const fn of fns || []) fn(msg.event);
  };
  ws.onclose = () => {
    for (const fn of streamClosed) fn();
    setTimeout(streamConnect, STREAM_RECONNECT);
  };
}

// The login page: posts the form to /api/auth/login, which sets the
// HttpOnly session cookie, then goes where the user was headed.
import { $, errorMessage, markReady } from './common.js';

const MSG_WRONG = 'Wrong user name, password or 2FA code.';
const MSG_UNREACHABLE = 'Cannot reach the device.';

/**
 * safeNext returns the path to go to after logging in: next when it is a
 * path on this site (not the login page itself), else "/". Anything that a
 * browser could read as another host ("//x", "/\x", tabs) is refused.
 */
function safeNext(next) {
  if (typeof next !== 'string' || !next.startsWith('/') || next.startsWith('//') ||
      next.includes('\\') || /[\u0000-\u0020\u007f]/.test(next)) {
    return '/';
  }
  let url;
  try {
    url = new URL(next, location.origin);
  } catch {
    return '/';
  }
  if (url.origin !== location.origin || url.pathname === '/login' || url.pathname.startsWith('/login/')) {
    return '/';
  }
  return url.pathname + url.search + url.hash;
}

const form = $('login-form');
const submit = $('login-submit');
const errorBox = $('login-error');
const params = new URLSearchParams(location.search);
let countdown = 0;

function setError(msg, counting = false) {
  errorBox.textContent = msg;
  errorBox.hidden = !msg;
  // While a countdown runs, screen readers need not hear every second of it.
  if (counting) errorBox.setAttribute('aria-busy', 'true');
  else errorBox.removeAttribute('aria-busy');
}

/** rateLimited shows the wait from Retry-After and counts it down. */
function rateLimited(retryAfter) {
  clearInterval(countdown);
  let left = Number.parseInt(retryAfter, 10);
  if (!(left > 0)) {
    setError('Too many failed attempts. Try again later.');
    return;
  }
  let counting = false;
  const tick = () => {
    if (left <= 0) {
      clearInterval(countdown);
      setError('');
      return;
    }
    setError(`Too many failed attempts. Try again in ${left} seconds.`, counting);
    counting = true;
    left--;
  };
  tick();
  countdown = setInterval(tick, 1000);
}

async function login(event) {
  event.preventDefault();
  clearInterval(countdown);
  setError('');
  const code = $('code').value.replace(/\s+/g, '');
  const body = new URLSearchParams({ user: $('user').value, passwd: $('passwd').value + code });
  submit.disabled = true;
  let res;
  try {
    res = await fetch('/api/auth/login', { method: 'POST', body, credentials: 'same-origin' });
  } catch {
    res = null;
  }
  submit.disabled = false;
  if (res && res.ok) {
    await res.arrayBuffer(); // read, so that the request ends (see alreadyIn)
    location.replace(safeNext(params.get('next')));
    return;
  }
  if (!res || res.status >= 500) {
    setError(MSG_UNREACHABLE);
  } else if (res.status === 403) {
    setError(MSG_WRONG);
    $('code').value = '';
    $('passwd').select();
  } else if (res.status === 429) {
    rateLimited(res.headers.get('Retry-After'));
  } else {
    setError('Login failed: ' + (await errorMessage(res)));
  }
}

if (params.get('expired') === '1') {
  const notice = $('login-notice');
  notice.textContent = 'Your session has ended. Please log in again.';
  notice.hidden = false;
}
/**
 * alreadyIn moves on when the browser holds a live session: a login posted
 * from another site (kvmd's HTML form recipe, redirect=/kvm/) sets the
 * SameSite=Strict cookie, but the page load that follows is still that
 * site's navigation and goes without it, so the server sends it here.
 * This request is the device's own, and carries the cookie.
 */
async function alreadyIn() {
  if (params.get('expired') === '1') return false;
  try {
    const res = await fetch('/api/auth/check', { credentials: 'same-origin' });
    // Only the status matters, but the body is read all the same: one
    // left unread keeps the request open in the browser, and a tool that
    // waits for the network to go idle would wait for ever.
    await res.arrayBuffer();
    if (res.ok) {
      location.replace(safeNext(params.get('next')));
      return true;
    }
  } catch {
    // Unreachable: the form says so when it is used.
  }
  return false;
}

form.addEventListener('submit', login);
alreadyIn().then((moved) => {
  if (!moved) markReady();
});

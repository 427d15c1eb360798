// The dashboard's virtual media card: the images in the device's storage,
// uploaded from this browser (with a progress bar and a cancel button),
// and the drive that shows one of them to the host as a CD-ROM or a flash
// drive. The state is /api/msd, live from the event stream (/api/ws): an
// upload from another window or client shows too, and so does, after a
// reload, what became of this page's own upload.
import { $, api, errorMessage, fmtBytes, h, mountTemplate } from './common.js';
import { onEvent, onStreamClosed } from './events.js';

const MIN_CDROM = 300 * 2048; // the kernel's smallest CD-ROM (msd.MinCDROMSize)
const MAX_CDROM = 256 * 60 * 75 * 2048; // beyond, the host sees only this much
// The upload this page started is named in the address's fragment while
// it runs, which a reload keeps: the reload cuts the upload, and the page
// then says what became of it from what the server shows.
const PENDING = '#msd-upload=';

function pending() {
  return location.hash.startsWith(PENDING) ? decodeURIComponent(location.hash.slice(PENDING.length)) : '';
}

function setPending(name) {
  history.replaceState(null, '', location.pathname + location.search + (name ? PENDING + encodeURIComponent(name) : ''));
}

let state = null; // the last /api/msd result
let xhr = null; // this page's upload, while it runs
let choice = null; // {image, cdrom, rw}: what the controls show while disconnected
let confirmDelete = null; // the image awaiting confirmation

function message(text, bad) {
  const el = $('msd-msg');
  el.textContent = text;
  el.classList.toggle('warn', !!bad);
}

async function post(path) {
  const res = await api(path, { method: 'POST' });
  if (!res.ok) throw new Error(await errorMessage(res));
}

function driveText(d) {
  if (!d.image) return d.connected ? 'Connected (an image the daemon does not know)' : 'No image chosen';
  const mode = d.cdrom ? 'CD-ROM' : d.rw ? 'flash drive, writable' : 'flash drive, read-only';
  return (d.connected ? 'Connected to the host: ' : 'Chosen, not connected: ') + d.image.name + ' (' + mode + ')';
}

function imageInfo(name) {
  return state?.storage?.images?.[name] || null;
}

/** renderChoice shows the image, mode and writable controls. */
function renderChoice() {
  const d = state.drive;
  const connected = d.connected;
  const c = connected ? { image: d.image?.name || '', cdrom: d.cdrom, rw: d.rw } : choice;
  const sel = $('msd-image');
  const names = Object.keys(state.storage.images).sort((a, b) => a.localeCompare(b));
  const opts = [h('option', { value: '', textContent: names.length ? '— choose an image —' : '— no images —' })];
  for (const n of names) opts.push(h('option', { value: n, textContent: n }));
  if (c.image && !names.includes(c.image)) opts.push(h('option', { value: c.image, textContent: c.image }));
  sel.replaceChildren(...opts);
  sel.value = c.image || '';
  $('msd-cdrom').checked = !!c.cdrom;
  $('msd-flash').checked = !c.cdrom;
  const info = imageInfo(c.image);
  const canWrite = !c.cdrom && (!info || info.writable);
  $('msd-rw').checked = !!c.rw && canWrite;
  const busy = state.busy && !state.storage.uploading && !state.storage.downloading;
  for (const id of ['msd-image', 'msd-cdrom', 'msd-flash']) $(id).disabled = connected || busy;
  $('msd-rw').disabled = connected || busy || !canWrite;
  $('msd-connect').hidden = connected;
  $('msd-disconnect').hidden = !connected;
  $('msd-connect').disabled = busy || !c.image;
  $('msd-disconnect').disabled = busy;
  let note = '';
  if (info && c.cdrom && info.size < MIN_CDROM) note = 'This image is too small for a CD-ROM (600 KiB at least): use flash drive.';
  else if (info && c.cdrom && info.size > MAX_CDROM) note = 'The kernel shows a CD-ROM of at most 2.2 GiB: the host would see only the beginning of this image. Use flash drive.';
  else if (info && !info.writable && !c.cdrom) note = 'This image is read-only (an .iso is never written).';
  $('msd-note').textContent = note;
}

function renderImages() {
  const images = state.storage.images;
  const d = state.drive;
  const rows = Object.keys(images).sort((a, b) => a.localeCompare(b)).map((name) => {
    const img = images[name];
    const inUse = d.connected && d.image?.name === name;
    const del = h('button', { type: 'button', className: 'secondary', textContent: 'Delete', disabled: inUse || !img.removable });
    del.title = inUse ? 'Disconnect it first' : '';
    del.dataset.image = name;
    del.addEventListener('click', () => askDelete(name));
    const dl = h('a', { href: '/api/msd/read?image=' + encodeURIComponent(name), textContent: 'Download' });
    dl.setAttribute('download', name);
    const added = img.mod_ts ? new Date(img.mod_ts * 1000).toLocaleString() : '';
    return h('tr', { className: inUse ? 'in-use' : '' },
      h('td', {}, name + (img.complete ? '' : ' (incomplete)')),
      h('td', {}, fmtBytes(img.size)),
      h('td', {}, added),
      h('td', { className: 'actions' }, dl, ' ', del));
  });
  $('msd-images').tBodies[0].replaceChildren(...rows);
  $('msd-empty').hidden = rows.length > 0;
  const p = state.storage.parts?.[''];
  $('msd-space').textContent = p ? `${fmtBytes(p.free)} free of ${fmtBytes(p.size)}` : '';
}

/** renderUpload shows an upload: this page's, or the server's from elsewhere. */
function renderUpload() {
  const up = state?.storage?.uploading;
  const box = $('msd-progress');
  if (xhr) {
    box.hidden = false;
    $('msd-cancel').hidden = false;
    return; // this page's own progress comes from the request itself
  }
  $('msd-cancel').hidden = true;
  box.hidden = !up;
  if (up) setProgress(up.name, up.written, up.size, ' (from another window or client)');
  box.dataset.source = up ? 'server' : '';
  // A reload cut this page's upload: say what became of it.
  const name = pending();
  if (name && state?.storage && !(up && up.name === name)) {
    setPending('');
    if (!state.storage.images[name]) message(`The upload of ${name} was interrupted (the page was left or reloaded); nothing of it was kept.`, true);
  }
}

function setProgress(name, done, total, suffix) {
  const pct = total > 0 ? Math.floor((done / total) * 100) : 100;
  $('msd-progress-bar').value = pct;
  $('msd-progress-text').textContent = `Uploading ${name}: ${fmtBytes(done)} of ${fmtBytes(total)} (${pct} %)${suffix || ''}`;
}

/**
 * mountBody puts the card's controls in place, once, from their template:
 * the page comes without them and gets them with the first state that
 * shows them (keyboard.js's mountForm says why).
 */
function mountBody() {
  if (!mountTemplate('msd-body-tpl')) return;
  $('msd-image').addEventListener('change', () => {
    choice.image = $('msd-image').value;
    const info = imageInfo(choice.image);
    // An .iso is a CD by default; anything else a flash drive.
    if (choice.image) choice.cdrom = choice.image.toLowerCase().endsWith('.iso') && (!info || info.size >= MIN_CDROM);
    renderChoice();
  });
  for (const id of ['msd-cdrom', 'msd-flash']) {
    $(id).addEventListener('change', () => {
      choice.cdrom = $('msd-cdrom').checked;
      if (choice.cdrom) choice.rw = false;
      renderChoice();
    });
  }
  $('msd-rw').addEventListener('change', () => {
    choice.rw = $('msd-rw').checked;
  });
  $('msd-connect').addEventListener('click', connectDrive);
  $('msd-disconnect').addEventListener('click', disconnectDrive);
  $('msd-upload-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const file = $('msd-file').files[0];
    if (!file) {
      message('Choose a file to upload first.', true);
      return;
    }
    if (state?.storage?.images?.[file.name]) {
      message(`${file.name} is already on the device: delete it first, or rename the file.`, true);
      return;
    }
    upload(file);
  });
  $('msd-cancel').addEventListener('click', () => {
    if (xhr) xhr.abort();
  });
  $('msd-confirm-yes').addEventListener('click', () => {
    $('msd-confirm').hidden = true;
    if (confirmDelete) deleteImage(confirmDelete);
    confirmDelete = null;
  });
  $('msd-confirm-no').addEventListener('click', () => {
    $('msd-confirm').hidden = true;
    confirmDelete = null;
  });
}

function render(st) {
  state = st;
  const card = $('msd');
  card.dataset.enabled = st.enabled ? '1' : '0';
  card.dataset.online = st.online ? '1' : '0';
  $('msd-off').hidden = st.enabled && st.online;
  $('msd-off').textContent = !st.enabled
    ? 'Virtual media is turned off on this device.'
    : 'Virtual media is offline: the USB gadget has no drive, or the image storage cannot be read.';
  if (st.enabled && st.online) mountBody();
  $('msd-body').hidden = !(st.enabled && st.online);
  if (!st.online || !st.storage || !st.drive) return;
  if (!choice) choice = { image: st.drive.image?.name || '', cdrom: st.drive.cdrom, rw: st.drive.rw };
  $('msd-drive').textContent = driveText(st.drive);
  $('msd-drive').className = 'state ' + (st.drive.connected ? 'good' : '');
  renderChoice();
  renderImages();
  renderUpload();
}

async function refresh() {
  try {
    const res = await api('/api/msd');
    if (res.ok) render((await res.json()).result);
  } catch {
    // The event stream brings the state when the device answers again.
  }
}

async function connectDrive() {
  const c = choice;
  message('');
  try {
    const q = new URLSearchParams({ image: c.image, cdrom: c.cdrom ? '1' : '0', rw: c.rw ? '1' : '0' });
    await post('/api/msd/set_params?' + q);
    await post('/api/msd/set_connected?connected=1');
  } catch (e) {
    message('Could not connect: ' + e.message, true);
  }
  refresh();
}

async function disconnectDrive() {
  message('');
  try {
    await post('/api/msd/set_connected?connected=0');
  } catch (e) {
    message('Could not disconnect: ' + e.message, true);
  }
  refresh();
}

function askDelete(name) {
  confirmDelete = name;
  $('msd-confirm-text').textContent = `Delete ${name} from the device? This cannot be undone.`;
  $('msd-confirm').hidden = false;
  $('msd-confirm-yes').focus();
}

async function deleteImage(name) {
  message('');
  try {
    await post('/api/msd/remove?image=' + encodeURIComponent(name));
    message(`${name} deleted.`);
    if (choice?.image === name) choice.image = '';
  } catch (e) {
    message('Could not delete: ' + e.message, true);
  }
  refresh();
}

function upload(file) {
  message('');
  const req = new XMLHttpRequest();
  xhr = req;
  setPending(file.name);
  req.open('POST', '/api/msd/write?image=' + encodeURIComponent(file.name));
  req.upload.onprogress = (ev) => setProgress(file.name, ev.loaded, ev.lengthComputable ? ev.total : file.size);
  const done = (text, bad) => {
    xhr = null;
    setPending('');
    $('msd-upload').disabled = false;
    message(text, bad);
    renderUpload();
    refresh();
  };
  req.onload = () => {
    let body = null;
    try { body = JSON.parse(req.responseText); } catch { /* a proxy's page */ }
    if (req.status === 200) {
      $('msd-file').value = '';
      choice = { ...choice, image: file.name };
      done(`${file.name} uploaded.`);
    } else {
      done('Upload failed: ' + (body?.result?.error_msg || 'HTTP ' + req.status), true);
    }
  };
  req.onerror = () => done('Upload failed: the connection was lost; nothing was kept.', true);
  req.onabort = () => done('Upload cancelled; nothing was kept.', false);
  $('msd-upload').disabled = true;
  setProgress(file.name, 0, file.size);
  renderUpload();
  req.send(file);
}

// Leaving the page cuts an upload: the browser asks first.
window.addEventListener('beforeunload', (ev) => {
  if (xhr) ev.preventDefault();
});
onEvent('msd', (st) => {
  render(st);
  $('msd').dataset.live = '1';
});
onStreamClosed(() => {
  $('msd').dataset.live = '0';
  // No state yet (the stream was refused or cut before its greeting): ask.
  if (!state) refresh();
});

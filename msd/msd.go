package msd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// CD-ROM limits of the kernel's mass-storage function
// (drivers/usb/gadget/function/storage_common.c, fsg_lun_open): a file
// shorter than 300 frames of 2048 bytes is refused (ETOOSMALL); of a
// longer one than 256*60*75 frames only the first ones are shown.
const (
	MinCDROMSize = 300 * 2048
	MaxCDROMSize = 256 * 60 * 75 * 2048
	// MinFlashSize is one 512-byte block: a flash image shorter than one
	// is refused too.
	MinFlashSize = 512
)

// etoosmall is the kernel's errno for a backing file too small
// (include/linux/errno.h), not one of userspace's.
const etoosmall = syscall.Errno(525)

// State is kvmd's /api/msd result and msd event (otg/__init__.py,
// get_state): storage and drive are both objects when the drive is
// online, both null when it is not.
type State struct {
	Enabled bool          `json:"enabled"`
	Online  bool          `json:"online"`
	Busy    bool          `json:"busy"`
	Storage *StorageState `json:"storage"`
	Drive   *DriveState   `json:"drive"`
}

// Disabled is kvmd's state of an MSD that is turned off
// (plugins/msd/disabled.py).
func Disabled() State { return State{} }

// StorageState is the image storage.
type StorageState struct {
	Images map[string]ImageInfo `json:"images"`
	// Parts has one part, "": the storage directory's file system.
	Parts map[string]Part `json:"parts"`
	// Downloading is an image being read from the storage (GET
	// /api/msd/read), Uploading one being written to it; null when none.
	Downloading *Downloading `json:"downloading"`
	Uploading   *Uploading   `json:"uploading"`
}

// Uploading is the progress of an upload (kvmd's MsdFileWriter state).
type Uploading struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Written int64  `json:"written"`
}

// Downloading is the progress of a read (kvmd's MsdFileReader state,
// with its spelling).
type Downloading struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Readed int64  `json:"readed"`
}

// DriveState is kvmd's virtual drive: the image chosen and the flags it is
// (or will be) connected with.
type DriveState struct {
	Image     *DriveImage `json:"image"`
	Connected bool        `json:"connected"`
	CDROM     bool        `json:"cdrom"`
	RW        bool        `json:"rw"`
}

// DriveImage is the drive's image: kvmd's Image without its path.
type DriveImage struct {
	Name string `json:"name"`
	// InStorage is false for a file the LUN was given by something else
	// (kvmd-otg's start image, a hand-written path).
	InStorage bool `json:"in_storage"`
	ImageInfo
}

// Params are set_params' changes; nil leaves a field as it is, an empty
// Image clears the choice.
type Params struct {
	Image     *string
	CDROM, RW *bool
}

// Config is what New needs.
type Config struct {
	// Dir is the image storage directory.
	Dir string
	// Drive is the LUN.
	Drive Drive
	Log   *slog.Logger
	// PollEvery is how often the storage and the LUN are read again for
	// the "msd" subsystem's changes (0: DefaultPollEvery); an operation
	// has them read at once.
	PollEvery time.Duration
}

// DefaultPollEvery is Config.PollEvery's default.
const DefaultPollEvery = 500 * time.Millisecond

// Manager is the virtual media: the storage, the LUN and kvmd's virtual
// drive between them. Drive operations (set_params, set_connected,
// reset, remove) run one at a time, and a second one while one runs is
// refused with ErrBusy, as in kvmd; an upload and a read may run beside
// them, one of each at a time.
type Manager struct {
	st    storage
	drive Drive
	log   *slog.Logger
	kick  chan struct{}
	every time.Duration

	op        sync.Mutex // held by a drive operation
	refreshMu sync.Mutex // one refresh at a time

	mu sync.Mutex
	// gen counts the changes operations made; a refresh that read the
	// machine before one drops what it read.
	gen     uint64
	online  bool
	offline string // why not online, logged once
	realDir string
	images  map[string]ImageInfo
	part    Part
	lun     LUNState
	outside *DriveImage // the LUN's file when it is not in the storage
	vd      *virtualDrive
	opBusy  bool
	upload  *Upload
	reader  *Reader
}

// virtualDrive is kvmd's _VirtualDrive: image is an image's name, in the
// storage unless outside.
type virtualDrive struct {
	image     string
	outside   bool
	connected bool
	cdrom, rw bool
}

// New returns the manager of the storage in cfg.Dir and removes what
// earlier uploads left unfinished (kvmd's remove_incomplete, done for
// every cut upload here).
func New(cfg Config) (*Manager, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("msd: storage directory: %w", err)
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	m := &Manager{st: storage{dir: dir, log: cfg.Log}, drive: cfg.Drive, log: cfg.Log, kick: make(chan struct{}, 1), every: cfg.PollEvery}
	if err := m.st.removeIncomplete(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("msd: removing incomplete uploads", "dir", dir, "err", err)
	}
	m.refresh()
	return m, nil
}

// Dir is the storage directory.
func (m *Manager) Dir() string { return m.st.dir }

// poke asks the subsystem's Watch for a refresh now.
func (m *Manager) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// refresh reads the storage and the LUN and brings the virtual drive in
// line with them, as kvmd's reload and set_online do: a LUN with a file
// is connected, and its flags are the drive's; without one, the drive
// keeps the choices made with set_params, less an image that is gone.
func (m *Manager) refresh() {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	m.mu.Lock()
	gen := m.gen
	m.mu.Unlock()

	var why string
	var lun LUNState
	var outside *DriveImage
	images, part, err := m.st.scan()
	realDir := ""
	if err == nil {
		realDir, err = m.st.realDir()
	}
	switch {
	case err != nil:
		why = err.Error()
	case m.drive == nil || !m.drive.Present():
		why = "no mass-storage LUN in the USB gadget"
	default:
		if lun, err = m.drive.Get(); err != nil {
			why = err.Error()
		} else if lun.File != "" && filepath.Dir(lun.File) != realDir {
			outside = outsideImage(lun.File)
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if gen != m.gen {
		return // an operation changed things meanwhile; its own refresh follows
	}
	if why != "" {
		if why != m.offline {
			m.log.Warn("msd: virtual media offline", "why", why)
		}
		m.offline, m.online, m.vd, m.images, m.outside = why, false, nil, nil, nil
		return
	}
	if m.offline != "" {
		m.log.Info("msd: virtual media online", "dir", m.st.dir)
	}
	m.offline, m.online = "", true
	m.realDir, m.images, m.part, m.lun, m.outside = realDir, images, part, lun, outside

	if lun.File != "" {
		real := &virtualDrive{image: filepath.Base(lun.File), outside: outside != nil, connected: true, cdrom: lun.CDROM, rw: !lun.RO}
		m.vd = real
		return
	}
	if m.vd == nil {
		m.vd = &virtualDrive{cdrom: lun.CDROM, rw: !lun.RO}
	}
	if m.vd.outside {
		m.vd.image, m.vd.outside = "", false
	} else if _, ok := images[m.vd.image]; !ok {
		m.vd.image = ""
	}
	m.vd.connected = false
}

// outsideImage describes a file given to the LUN from outside the
// storage, as kvmd does (in_storage false, never removable).
func outsideImage(path string) *DriveImage {
	d := &DriveImage{Name: filepath.Base(path)}
	d.Complete = true
	if fi, err := os.Stat(path); err == nil {
		d.Size, d.ModTS = fi.Size(), modTime(fi.ModTime())
		d.Writable = imageWritable(d.Name, path)
	}
	return d
}

// State returns the current state.
func (m *Manager) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := State{Enabled: true, Online: m.online, Busy: m.opBusy || m.upload != nil || m.reader != nil}
	if !m.online {
		return st
	}
	s := &StorageState{Images: make(map[string]ImageInfo, len(m.images)), Parts: map[string]Part{"": m.part}}
	for k, v := range m.images {
		s.Images[k] = v
	}
	if u := m.upload; u != nil {
		s.Uploading = &Uploading{Name: u.name, Size: u.size, Written: u.written.Load()}
	}
	if r := m.reader; r != nil {
		s.Downloading = &Downloading{Name: r.name, Size: r.size, Readed: r.readed.Load()}
	}
	st.Storage = s
	d := &DriveState{Connected: m.vd.connected, CDROM: m.vd.cdrom, RW: m.vd.rw}
	switch {
	case m.vd.image == "":
	case m.vd.outside && m.outside != nil:
		img := *m.outside
		d.Image = &img
	default:
		if info, ok := m.images[m.vd.image]; ok {
			d.Image = &DriveImage{Name: m.vd.image, InStorage: true, ImageInfo: info}
		}
	}
	st.Drive = d
	return st
}

// beginOp starts a drive operation, or refuses it while another runs.
func (m *Manager) beginOp() (func(), error) {
	if !m.op.TryLock() {
		return nil, ErrBusy
	}
	m.mu.Lock()
	m.opBusy = true
	m.mu.Unlock()
	m.poke()
	return func() {
		m.mu.Lock()
		m.opBusy = false
		m.mu.Unlock()
		m.op.Unlock()
		m.poke()
	}, nil
}

// changed records that an operation changed the drive or the storage,
// then reads them again.
func (m *Manager) changed() {
	m.mu.Lock()
	m.gen++
	m.mu.Unlock()
	m.refresh()
}

// connectedLocked says whether a medium is in the LUN.
func (m *Manager) connectedLocked() bool { return m.vd.connected || m.lun.File != "" }

// SetParams chooses the image and the flags the drive will be connected
// with; the drive must be disconnected. rw is dropped for a CD-ROM and
// for an image that cannot be written, as kvmd does.
func (m *Manager) SetParams(p Params) error {
	done, err := m.beginOp()
	if err != nil {
		return err
	}
	defer done()
	m.refresh()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.online {
		return ErrOffline
	}
	if m.connectedLocked() {
		return ErrConnected
	}
	vd := *m.vd
	if p.Image != nil {
		vd.image, vd.outside = "", false
		if *p.Image != "" {
			if _, ok := m.images[*p.Image]; !ok {
				return ErrUnknownImage
			}
			vd.image = *p.Image
		}
	}
	if p.CDROM != nil {
		vd.cdrom = *p.CDROM
	}
	if p.RW != nil {
		vd.rw = *p.RW
	}
	if vd.rw && (vd.cdrom || (vd.image != "" && !m.images[vd.image].Writable)) {
		vd.rw = false
	}
	*m.vd = vd
	m.gen++
	return nil
}

// SetConnected connects the chosen image to the LUN (ro and cdrom first,
// then file: the kernel takes the flags only while no file is open), or
// ejects it.
func (m *Manager) SetConnected(connected bool) error {
	done, err := m.beginOp()
	if err != nil {
		return err
	}
	defer done()
	m.refresh()
	if connected {
		return m.connect()
	}
	return m.disconnect()
}

func (m *Manager) connect() error {
	m.mu.Lock()
	if !m.online {
		m.mu.Unlock()
		return ErrOffline
	}
	if m.connectedLocked() {
		m.mu.Unlock()
		return ErrConnected
	}
	if m.vd.image == "" {
		m.mu.Unlock()
		return ErrNotSelected
	}
	info, ok := m.images[m.vd.image]
	if !ok {
		m.mu.Unlock()
		return ErrUnknownImage
	}
	name, cdrom, rw := m.vd.image, m.vd.cdrom, m.vd.rw
	path := filepath.Join(m.realDir, name)
	m.mu.Unlock()

	if cdrom && info.Size < MinCDROMSize {
		return ErrOperation.withMsg(fmt.Sprintf("The image is too small for a CD-ROM (%d bytes; the kernel needs at least %d, 600 KiB): connect it as a flash drive", info.Size, MinCDROMSize))
	}
	if info.Size < MinFlashSize {
		return ErrOperation.withMsg(fmt.Sprintf("The image is too small for a drive (%d bytes; the kernel needs at least one block of %d)", info.Size, MinFlashSize))
	}
	if cdrom && info.Size > MaxCDROMSize {
		m.log.Warn("msd: a CD-ROM image larger than the kernel shows: the host sees only its first 2.2 GiB", "image", LogName(name), "size", info.Size)
	}
	if _, err := os.Stat(path); err != nil {
		return ErrUnknownImage.with(err)
	}
	err := driveError(m.drive.SetRO(!rw))
	if err == nil {
		err = driveError(m.drive.SetCDROM(cdrom))
	}
	if err == nil {
		err = driveError(m.drive.SetFile(path))
	}
	if err != nil {
		m.changed()
		return err
	}
	m.log.Info("msd: image connected", "image", LogName(name), "cdrom", cdrom, "rw", rw)
	m.mu.Lock()
	m.vd.connected = true
	m.mu.Unlock()
	m.changed()
	return nil
}

func (m *Manager) disconnect() error {
	m.mu.Lock()
	if !m.online {
		m.mu.Unlock()
		return ErrOffline
	}
	if !m.connectedLocked() {
		m.mu.Unlock()
		return ErrDisconnected
	}
	m.mu.Unlock()
	if err := driveError(m.drive.Eject()); err != nil {
		m.changed()
		return err
	}
	m.log.Info("msd: image disconnected")
	m.mu.Lock()
	m.vd.connected = false
	m.mu.Unlock()
	m.changed()
	return nil
}

// Reset ejects the medium whatever the host says and puts the LUN's
// flags back to a read-only flash drive, as kvmd's reset does; a step
// that fails is logged and the others still run.
func (m *Manager) Reset() error {
	done, err := m.beginOp()
	if err != nil {
		return err
	}
	defer done()
	if m.drive != nil && m.drive.Present() {
		for _, step := range []struct {
			what string
			do   func() error
		}{
			{"eject", m.drive.Eject}, {"cdrom", func() error { return m.drive.SetCDROM(false) }},
			{"ro", func() error { return m.drive.SetRO(true) }},
		} {
			if err := step.do(); err != nil {
				m.log.Warn("msd: reset", "step", step.what, "err", err)
			}
		}
	}
	m.mu.Lock()
	if m.vd != nil {
		m.vd.connected, m.vd.cdrom, m.vd.rw = false, false, false
	}
	m.mu.Unlock()
	m.log.Info("msd: reset")
	m.changed()
	return nil
}

// Remove deletes an image from the storage. The image in the LUN cannot
// be removed (ErrConnected); one only chosen is unchosen.
func (m *Manager) Remove(name string) error {
	done, err := m.beginOp()
	if err != nil {
		return err
	}
	defer done()
	m.refresh()
	m.mu.Lock()
	if !m.online {
		m.mu.Unlock()
		return ErrOffline
	}
	if _, ok := m.images[name]; !ok {
		m.mu.Unlock()
		return ErrUnknownImage
	}
	if m.lun.File != "" && m.lun.File == filepath.Join(m.realDir, name) {
		m.mu.Unlock()
		return ErrConnected.withMsg("The image is connected to the host; disconnect it before removing it")
	}
	m.mu.Unlock()
	if err := m.st.remove(name); err != nil {
		m.changed()
		if errors.Is(err, fs.ErrNotExist) {
			return ErrUnknownImage.with(err)
		}
		return ErrOperation.withMsg("The image could not be removed").with(err)
	}
	m.log.Info("msd: image removed", "image", LogName(name))
	m.mu.Lock()
	if m.vd != nil && m.vd.image == name && !m.vd.outside {
		m.vd.image = ""
	}
	m.mu.Unlock()
	m.changed()
	return nil
}

// driveError turns the LUN's errors into kvmd's: EBUSY is the medium
// locked or the flags changed under an open file (MsdLockedError), a
// permission error MsdPermissionsError (otg/drive.py).
func driveError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EBUSY):
		return ErrLocked.with(err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return ErrPermissions.with(err)
	case errors.Is(err, etoosmall):
		return ErrOperation.withMsg("The image is too small for the drive").with(err)
	}
	return ErrOperation.withMsg("The USB drive refused the operation").with(err)
}

// Upload is an image being written to the storage: Begin reserves its
// name, Copy writes it, Commit makes it an image; Abort (or a failed Copy
// or Commit) leaves nothing behind.
type Upload struct {
	m       *Manager
	name    string
	size    int64
	written atomic.Int64
	tmp     *tmpFile
	start   time.Time
	done    bool
}

// Begin starts an upload of size bytes as image name: refused when the
// name is taken (ErrImageExists), another upload runs (ErrBusy) or the
// size is more than the storage's free space (ErrNoSpace).
func (m *Manager) Begin(name string, size int64) (*Upload, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, ErrOperation.withMsg("The image's size is unknown")
	}
	m.mu.Lock()
	switch {
	case !m.online:
		m.mu.Unlock()
		return nil, ErrOffline
	case m.upload != nil:
		m.mu.Unlock()
		return nil, ErrBusy.withMsg("Another image is being uploaded; try again when it is done")
	}
	if _, ok := m.images[name]; ok {
		m.mu.Unlock()
		return nil, ErrImageExists
	}
	if free := m.part.Free; size > free {
		m.mu.Unlock()
		return nil, ErrNoSpace.withMsg(fmt.Sprintf("The image (%d bytes) does not fit in the storage's free space (%d bytes)", size, free))
	}
	u := &Upload{m: m, name: name, size: size, start: time.Now()}
	m.upload = u
	m.mu.Unlock()

	fail := func(err error) (*Upload, error) {
		m.mu.Lock()
		m.upload = nil
		m.mu.Unlock()
		m.poke()
		return nil, err
	}
	if taken, err := m.st.exists(name); err != nil {
		return fail(ErrOperation.with(err))
	} else if taken {
		return fail(ErrImageExists)
	}
	tmp, err := m.st.create(size)
	if err != nil {
		if errors.Is(err, ErrNoSpace) {
			return fail(err)
		}
		return fail(ErrOperation.withMsg("The upload could not be started in the storage").with(err))
	}
	u.tmp = tmp
	m.log.Info("msd: upload started", "image", LogName(name), "size", size)
	m.poke()
	return u, nil
}

// Name is the image's name.
func (u *Upload) Name() string { return u.name }

// Size is the size announced.
func (u *Upload) Size() int64 { return u.size }

// Written is how much is written so far.
func (u *Upload) Written() int64 { return u.written.Load() }

// Copy writes r into the upload, to its end; progress (when not nil) is
// called after each write with the bytes written so far. It stops with
// an error when ctx ends, r fails, or r gives more than the size
// announced.
func (u *Upload) Copy(ctx context.Context, r io.Reader, progress func(int64)) error {
	_, err := copyInto(ctx, u.tmp, r, u.written.Load(), u.size, func(n int64) {
		u.written.Store(n)
		if progress != nil {
			progress(n)
		}
	})
	return err
}

// Commit makes the upload the image: it must hold every byte announced;
// its data is then on disk before its name appears. Any error aborts the
// upload.
func (u *Upload) Commit() error {
	if u.done {
		return errors.New("msd: upload already finished")
	}
	if w := u.written.Load(); w != u.size {
		u.Abort()
		return ErrOperation.withMsg(fmt.Sprintf("The upload is incomplete: %d of %d bytes arrived; nothing was kept", w, u.size))
	}
	u.done = true
	err := u.tmp.commit(u.m.st.dir, u.name)
	u.finish()
	if err != nil {
		u.m.log.Warn("msd: upload not kept", "image", LogName(u.name), "err", err)
		if errors.Is(err, ErrImageExists) {
			return ErrImageExists.with(err)
		}
		return ErrOperation.withMsg("The image could not be saved in the storage").with(err)
	}
	d := time.Since(u.start)
	u.m.log.Info("msd: upload complete", "image", LogName(u.name), "size", u.size, "dur", d.Round(time.Millisecond),
		"mib_per_s", fmt.Sprintf("%.1f", float64(u.size)/(1<<20)/max(d.Seconds(), 1e-3)))
	return nil
}

// Abort drops the upload and its temporary file.
func (u *Upload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.tmp.abort()
	u.m.log.Warn("msd: upload aborted; nothing kept", "image", LogName(u.name), "written", u.written.Load(), "size", u.size)
	u.finish()
}

func (u *Upload) finish() {
	m := u.m
	m.mu.Lock()
	if m.upload == u {
		m.upload = nil
	}
	m.gen++
	m.mu.Unlock()
	m.refresh()
	m.poke()
}

// Reader is an image being read from the storage (GET /api/msd/read).
type Reader struct {
	m      *Manager
	f      *os.File
	name   string
	size   int64
	readed atomic.Int64
	once   sync.Once
}

// Open opens an image for reading; one read runs at a time (ErrBusy).
func (m *Manager) Open(name string) (*Reader, error) {
	m.mu.Lock()
	switch {
	case !m.online:
		m.mu.Unlock()
		return nil, ErrOffline
	case m.reader != nil:
		m.mu.Unlock()
		return nil, ErrBusy.withMsg("Another image is being read; try again when it is done")
	}
	if _, ok := m.images[name]; !ok {
		m.mu.Unlock()
		return nil, ErrUnknownImage
	}
	r := &Reader{m: m, name: name}
	m.reader = r
	m.mu.Unlock()
	f, err := os.Open(m.st.path(name))
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		m.mu.Lock()
		m.reader = nil
		m.mu.Unlock()
		m.poke()
		return nil, ErrUnknownImage.with(err)
	}
	r.f, r.size = f, fi.Size()
	m.poke()
	return r, nil
}

// Name is the image's name.
func (r *Reader) Name() string { return r.name }

// Size is the image's size when opened.
func (r *Reader) Size() int64 { return r.size }

// Read reads the image, up to the size it had when opened.
func (r *Reader) Read(p []byte) (int, error) {
	left := r.size - r.readed.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := r.f.Read(p)
	r.readed.Add(int64(n))
	return n, err
}

// Close ends the read.
func (r *Reader) Close() error {
	var err error
	r.once.Do(func() {
		err = r.f.Close()
		r.m.mu.Lock()
		if r.m.reader == r {
			r.m.reader = nil
		}
		r.m.mu.Unlock()
		r.m.poke()
	})
	return err
}

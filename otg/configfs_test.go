package otg

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"kvmd/gadget"
)

// modelFS is a model of the machine as the gadget meets it: configfs's
// usb_gadget with the rules of the kernel (drivers/usb/gadget/configfs.c,
// function/f_hid.c, function/f_mass_storage.c and storage_common.c, fs/
// configfs/dir.c, Linux 6.1), sysfs's controllers and devtmpfs's nodes.
// What it models is what the booted test (imagetest/) checks on the real
// kernel; the unit tests use it for the paths the booted system cannot
// take (no controller, a controller in use, a half-made gadget).
//
// The rules: mkdir makes an item with its attributes and default groups
// (which rmdir refuses, and which go with their parent); rmdir refuses an
// item that still holds items or links the user made; only existing
// attributes can be written; a gadget is bound by writing a controller's
// name to UDC (ENODEV for none, EBUSY when another gadget holds it), which
// makes the hid functions' device nodes (each hid function takes the
// lowest minor free, at most 4 of them); linking a function into a bound
// gadget is EINVAL, unlinking one unbinds the gadget; an unknown function
// type is ENOENT; cdrom and ro are EBUSY while a medium is in.
type modelFS struct {
	nodes map[string]*node
	udcs  []string
	// mounted: configfs is mounted; composite: libcomposite is loaded.
	mounted, composite bool
	// funcTypes are the function drivers the kernel can load.
	funcTypes []string
	// udev gives the hidg nodes to udevUID when they are made, as the
	// package's rule does; -1: no rule.
	udevUID int
	// log is every change, for checking the order of operations.
	log []string
}

type nodeKind int

const (
	kDir nodeKind = iota
	kFile
	kLink
	kDev
)

type node struct {
	kind nodeKind
	data []byte
	// def marks a directory the kernel made with its parent.
	def      bool
	uid, gid int
	mode     fs.FileMode
	target   string // of a link
}

func newModel() *modelFS {
	m := &modelFS{nodes: map[string]*node{}, mounted: true, composite: true,
		funcTypes: []string{"hid", "mass_storage", "acm", "ecm"}, udevUID: -1}
	for _, d := range []string{"sys", "sys/kernel", "sys/kernel/config", "sys/class", "sys/class/udc", "sys/dev", "sys/dev/char", "dev", "proc", "proc/self"} {
		m.nodes[d] = &node{kind: kDir, mode: 0o755}
	}
	m.nodes["sys/kernel/config/usb_gadget"] = &node{kind: kDir, mode: 0o755}
	m.nodes["proc/self/mounts"] = &node{kind: kFile, data: []byte("sysfs /sys sysfs rw 0 0\nconfigfs /sys/kernel/config configfs rw 0 0\n")}
	return m
}

// withUDC adds a controller.
func (m *modelFS) withUDC(name string) *modelFS {
	m.udcs = append(m.udcs, name)
	m.nodes["sys/class/udc/"+name] = &node{kind: kDir, mode: 0o755}
	m.nodes["sys/class/udc/"+name+"/state"] = &node{kind: kFile, data: []byte("not attached\n")}
	m.nodes["sys/class/udc/"+name+"/function"] = &node{kind: kFile}
	return m
}

// noConfigfs leaves configfs unmounted: /sys/kernel/config is an empty
// directory of sysfs.
func (m *modelFS) noConfigfs() *modelFS {
	m.mounted, m.composite = false, false
	delete(m.nodes, "sys/kernel/config/usb_gadget")
	m.nodes["proc/self/mounts"].data = []byte("sysfs /sys sysfs rw 0 0\n")
	return m
}

// noComposite: configfs is mounted, libcomposite not loaded.
func (m *modelFS) noComposite() *modelFS {
	m.composite = false
	delete(m.nodes, "sys/kernel/config/usb_gadget")
	return m
}

func perr(op, p string, e error) error { return &fs.PathError{Op: op, Path: p, Err: e} }

func (m *modelFS) children(dir string) []string {
	var out []string
	for p := range m.nodes {
		if path.Dir(p) == dir && p != dir {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

type dirEntry struct {
	name string
	n    *node
}

func (d dirEntry) Name() string { return d.name }
func (d dirEntry) IsDir() bool  { return d.n.kind == kDir }
func (d dirEntry) Type() fs.FileMode {
	switch d.n.kind {
	case kDir:
		return fs.ModeDir
	case kLink:
		return fs.ModeSymlink
	case kDev:
		return fs.ModeDevice | fs.ModeCharDevice
	}
	return 0
}
func (d dirEntry) Info() (fs.FileInfo, error) { return nil, syscall.ENOSYS }

func (m *modelFS) ReadDir(rel string) ([]fs.DirEntry, error) {
	n, ok := m.nodes[rel]
	if !ok {
		return nil, perr("open", rel, fs.ErrNotExist)
	}
	if n.kind != kDir {
		return nil, perr("readdirent", rel, syscall.ENOTDIR)
	}
	var out []fs.DirEntry
	for _, c := range m.children(rel) {
		out = append(out, dirEntry{path.Base(c), m.nodes[c]})
	}
	return out, nil
}

func (m *modelFS) ReadFile(rel string) ([]byte, error) {
	n, ok := m.nodes[rel]
	if !ok {
		return nil, perr("open", rel, fs.ErrNotExist)
	}
	if n.kind == kDir {
		return nil, perr("read", rel, syscall.EISDIR)
	}
	return slices.Clone(n.data), nil
}

func (m *modelFS) ReadString(rel string) (string, error) {
	b, err := m.ReadFile(rel)
	return strings.Trim(string(b), " \t\r\n\x00"), err
}

func (m *modelFS) Readlink(rel string) (string, error) {
	n, ok := m.nodes[rel]
	if !ok {
		return "", perr("readlink", rel, fs.ErrNotExist)
	}
	if n.kind != kLink {
		return "", perr("readlink", rel, syscall.EINVAL)
	}
	return "/" + n.target, nil
}

func (m *modelFS) Exists(rel string) bool { _, ok := m.nodes[rel]; return ok }

func (m *modelFS) OwnedBy(rel string, uid int, mode fs.FileMode) bool {
	n, ok := m.nodes[rel]
	return ok && n.uid == uid && n.mode == mode
}

// gadgetOf splits a path below usb_gadget: the gadget's name and the rest.
func gadgetOf(rel string) (string, string, bool) {
	rest, ok := strings.CutPrefix(rel, gadget.ConfigfsDir+"/")
	if !ok {
		return "", "", false
	}
	g, sub, _ := strings.Cut(rest, "/")
	return g, sub, true
}

func (m *modelFS) add(p string, n *node) {
	if n.mode == 0 {
		n.mode = 0o644
		if n.kind == kDir {
			n.mode = 0o755
		}
	}
	m.nodes[p] = n
}

func (m *modelFS) files(dir string, names ...string) {
	for _, f := range names {
		v := ""
		if i := strings.IndexByte(f, '='); i >= 0 {
			f, v = f[:i], f[i+1:]
		}
		m.add(dir+"/"+f, &node{kind: kFile, data: []byte(v)})
	}
}

func (m *modelFS) defDir(p string) { m.add(p, &node{kind: kDir, def: true}) }

func (m *modelFS) Owner(rel string) (int, error) {
	n, ok := m.nodes[rel]
	if !ok {
		return -1, perr("stat", rel, fs.ErrNotExist)
	}
	return n.uid, nil
}

func (m *modelFS) Mkdir(rel string) error {
	if _, ok := m.nodes[rel]; ok {
		return perr("mkdir", rel, fs.ErrExist)
	}
	parent, ok := m.nodes[path.Dir(rel)]
	if !ok {
		return perr("mkdir", rel, fs.ErrNotExist)
	}
	if parent.kind != kDir {
		return perr("mkdir", rel, syscall.ENOTDIR)
	}
	g, sub, ok := gadgetOf(rel)
	if !ok {
		return perr("mkdir", rel, syscall.EPERM)
	}
	m.log = append(m.log, "mkdir "+rel)
	parts := strings.Split(sub, "/")
	switch {
	case sub == "":
		m.add(rel, &node{kind: kDir})
		m.files(rel, "UDC=\n", "idVendor=0x0000\n", "idProduct=0x0000\n", "bcdDevice=0x0601\n", "bcdUSB=0x0200\n",
			"bDeviceClass=0x00\n", "max_speed=super-speed-plus\n")
		for _, d := range []string{"functions", "configs", "strings", "os_desc"} {
			m.defDir(rel + "/" + d)
		}
		m.files(rel+"/os_desc", "use=0\n", "b_vendor_code=0x00\n", "qw_sign=\n")
	case len(parts) == 2 && parts[0] == "strings":
		m.add(rel, &node{kind: kDir})
		m.files(rel, "manufacturer=\n", "product=\n", "serialnumber=\n")
	case len(parts) == 2 && parts[0] == "configs":
		if !strings.Contains(parts[1], ".") {
			return perr("mkdir", rel, syscall.EINVAL)
		}
		m.add(rel, &node{kind: kDir})
		m.files(rel, "MaxPower=2\n", "bmAttributes=0x80\n")
		m.defDir(rel + "/strings")
	case len(parts) == 4 && parts[0] == "configs" && parts[2] == "strings":
		m.add(rel, &node{kind: kDir})
		m.files(rel, "configuration=\n")
	case len(parts) == 2 && parts[0] == "functions":
		typ, _, ok := strings.Cut(parts[1], ".")
		if !ok {
			return perr("mkdir", rel, syscall.EINVAL)
		}
		if !slices.Contains(m.funcTypes, typ) {
			// try_get_usb_function_instance: request_module found none.
			return perr("mkdir", rel, fs.ErrNotExist)
		}
		m.add(rel, &node{kind: kDir})
		switch typ {
		case "hid":
			minor, err := m.hidMinor()
			if err != nil {
				delete(m.nodes, rel)
				return perr("mkdir", rel, err)
			}
			m.files(rel, "protocol=0\n", "subclass=0\n", "report_length=0\n", "report_desc", "no_out_endpoint=0\n",
				fmt.Sprintf("dev=236:%d\n", minor))
		case "mass_storage":
			m.files(rel, "stall=1\n", "num_buffers=2\n")
			m.defDir(rel + "/lun.0")
			m.files(rel+"/lun.0", "file=\n", "ro=0\n", "cdrom=0\n", "removable=1\n", "nofua=0\n", "forced_eject",
				"inquiry_string=\n")
		}
	default:
		return perr("mkdir", rel, syscall.EPERM)
	}
	_ = g
	return nil
}

// bound returns the controller gadget g is bound to.
func (m *modelFS) bound(g string) string {
	n := m.nodes[gadget.ConfigfsDir+"/"+g+"/UDC"]
	if n == nil {
		return ""
	}
	return strings.TrimSpace(string(n.data))
}

func (m *modelFS) WriteAttr(rel string, data []byte) error {
	n, ok := m.nodes[rel]
	if !ok {
		return perr("open", rel, fs.ErrNotExist)
	}
	if n.kind != kFile {
		return perr("write", rel, syscall.EISDIR)
	}
	g, sub, _ := gadgetOf(rel)
	m.log = append(m.log, "write "+rel)
	switch {
	case sub == "UDC":
		name := strings.TrimSpace(string(data))
		if name == "" {
			if m.bound(g) == "" {
				return perr("write", rel, syscall.ENODEV)
			}
			m.unbindModel(g)
			return nil
		}
		if m.bound(g) != "" {
			return perr("write", rel, syscall.EBUSY)
		}
		if !slices.Contains(m.udcs, name) {
			return perr("write", rel, syscall.ENODEV)
		}
		ents, _ := m.ReadDir(gadget.ConfigfsDir)
		for _, e := range ents {
			if e.Name() != g && m.bound(e.Name()) == name {
				return perr("write", rel, syscall.EBUSY)
			}
		}
		if f := m.nodes["sys/class/udc/"+name+"/function"]; len(strings.TrimSpace(string(f.data))) > 0 {
			return perr("write", rel, syscall.EBUSY) // a legacy gadget driver
		}
		n.data = []byte(name + "\n")
		m.nodes["sys/class/udc/"+name+"/function"].data = []byte(g + "\n")
		m.nodes["sys/class/udc/"+name+"/state"].data = []byte("configured\n")
		// The hid functions linked into a configuration get their
		// nodes (f_hid.c's hidg_bind).
		for _, l := range m.linksOf(g) {
			fn := m.nodes[l].target
			if strings.HasPrefix(path.Base(fn), "hid.") {
				dev := strings.TrimSpace(string(m.nodes[fn+"/dev"].data))
				minor := strings.TrimPrefix(dev, "236:")
				m.add("sys/dev/char/"+dev, &node{kind: kDir})
				m.files("sys/dev/char/"+dev, "uevent=MAJOR=236\nMINOR="+minor+"\nDEVNAME=hidg"+minor+"\n")
				uid, mode := 0, fs.FileMode(0o600)
				if m.udevUID >= 0 {
					uid = m.udevUID
				}
				m.add("dev/hidg"+minor, &node{kind: kDev, uid: uid, mode: mode})
			}
		}
		return nil
	case strings.HasSuffix(sub, "/lun.0/cdrom") || strings.HasSuffix(sub, "/lun.0/ro"):
		file := m.nodes[path.Dir(rel)+"/file"]
		if len(strings.TrimSpace(string(file.data))) > 0 {
			return perr("write", rel, syscall.EBUSY)
		}
	case strings.HasPrefix(sub, "functions/") && m.bound(g) != "":
		// f_hid's and f_mass_storage's options are fixed while the
		// function is in use.
		if !strings.Contains(sub, "/lun.") {
			return perr("write", rel, syscall.EBUSY)
		}
	}
	if strings.HasSuffix(rel, "/idVendor") || strings.HasSuffix(rel, "/idProduct") ||
		strings.HasSuffix(rel, "/bcdDevice") || strings.HasSuffix(rel, "/bcdUSB") {
		var v uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "0x%x", &v); err != nil || v > 0xffff {
			return perr("write", rel, syscall.EINVAL)
		}
		data = fmt.Appendf(nil, "0x%04x\n", v) // shown back in lower case
	} else if !strings.HasSuffix(rel, "/report_desc") && !strings.HasSuffix(string(data), "\n") {
		data = append(slices.Clone(data), '\n') // shown with a newline
	}
	n.data = data
	return nil
}

func (m *modelFS) linksOf(g string) []string {
	var out []string
	for p, n := range m.nodes {
		if n.kind == kLink && strings.HasPrefix(p, gadget.ConfigfsDir+"/"+g+"/configs/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (m *modelFS) unbindModel(g string) {
	udc := m.bound(g)
	m.nodes[gadget.ConfigfsDir+"/"+g+"/UDC"].data = []byte("\n")
	m.nodes["sys/class/udc/"+udc+"/function"].data = nil
	// dummy_hcd leaves state stale; others say "not attached".
	for p := range m.nodes {
		if strings.HasPrefix(p, "dev/hidg") {
			delete(m.nodes, p)
		}
	}
}

func (m *modelFS) Symlink(target, link string) error {
	t := strings.TrimPrefix(target, "/")
	g, sub, ok := gadgetOf(link)
	tg, tsub, tok := gadgetOf(t)
	parts := strings.Split(sub, "/")
	if !ok || !tok || g != tg || len(parts) != 3 || parts[0] != "configs" || !strings.HasPrefix(tsub, "functions/") {
		return perr("symlink", link, syscall.EPERM)
	}
	if _, ok := m.nodes[t]; !ok {
		return perr("symlink", link, fs.ErrNotExist)
	}
	if _, ok := m.nodes[link]; ok {
		return perr("symlink", link, fs.ErrExist)
	}
	if m.bound(g) != "" {
		return perr("symlink", link, syscall.EINVAL) // config_usb_cfg_link
	}
	m.log = append(m.log, "symlink "+link)
	m.nodes[link] = &node{kind: kLink, target: t, mode: 0o777}
	return nil
}

func (m *modelFS) Remove(rel string) error {
	n, ok := m.nodes[rel]
	if !ok {
		return perr("remove", rel, fs.ErrNotExist)
	}
	if _, _, ok := gadgetOf(rel); !ok {
		return perr("remove", rel, syscall.EPERM)
	}
	m.log = append(m.log, "remove "+rel)
	if n.kind == kLink {
		// config_usb_cfg_unlink unbinds a bound gadget first.
		if g, _, _ := gadgetOf(rel); m.bound(g) != "" {
			m.unbindModel(g)
		}
		delete(m.nodes, rel)
		return nil
	}
	if n.kind != kDir || n.def {
		return perr("remove", rel, syscall.EPERM)
	}
	// Refuse while the user's items or links remain anywhere below
	// (configfs_detach_prep).
	for p, c := range m.nodes {
		if !strings.HasPrefix(p, rel+"/") {
			continue
		}
		if c.kind == kLink || (c.kind == kDir && !c.def) {
			return perr("remove", rel, syscall.ENOTEMPTY)
		}
	}
	g, sub, _ := gadgetOf(rel)
	if sub == "" && m.bound(g) != "" {
		m.unbindModel(g)
	}
	for p := range m.nodes {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			delete(m.nodes, p)
		}
	}
	return nil
}

func (m *modelFS) Chown(rel string, uid, gid int) error {
	n, ok := m.nodes[rel]
	if !ok {
		return perr("chown", rel, fs.ErrNotExist)
	}
	m.log = append(m.log, "chown "+rel)
	n.uid, n.gid = uid, gid
	return nil
}

func (m *modelFS) Chmod(rel string, mode fs.FileMode) error {
	n, ok := m.nodes[rel]
	if !ok {
		return perr("chmod", rel, fs.ErrNotExist)
	}
	n.mode = mode
	return nil
}

// manager is a Manager on the model, with a short wait for the nodes.
func (m *modelFS) manager() *Manager { return &Manager{fs: m} }

var _ cfs = (*modelFS)(nil)

// quick are settings that wait for nothing.
func quick() Settings {
	s := DefaultSettings()
	s.NodeWait = 20 * time.Millisecond
	return s
}

// hidMinors is f_hid.c's HIDG_MINORS: the hid functions the kernel has
// room for, across every gadget.
const hidMinors = 4

// hidMinor is the minor a new hid function gets: the lowest one no
// other holds (f_hid.c's hidg_get_minor, an IDA), ENODEV when all are
// taken.
func (m *modelFS) hidMinor() (int, error) {
	taken := map[string]bool{}
	for p, n := range m.nodes {
		if strings.HasSuffix(p, "/dev") && strings.Contains(p, "/functions/hid.") {
			taken[strings.TrimSpace(string(n.data))] = true
		}
	}
	for minor := range hidMinors {
		if !taken[fmt.Sprintf("236:%d", minor)] {
			return minor, nil
		}
	}
	return 0, syscall.ENODEV
}

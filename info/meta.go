package info

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"go.yaml.in/yaml/v3"
)

// maxYAML bounds an operator's YAML file: these are a few lines.
const maxYAML = 256 << 10

// readYAML reads a YAML file into JSON-compatible values (maps with string
// keys).
func readYAML(path string) (any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxYAML+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxYAML {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxYAML)
	}
	var v any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return jsonable(v), nil
}

// jsonable converts what YAML decoding makes into what encoding/json takes:
// mappings with non-string keys get their keys printed.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	}
	return v
}

// readMeta is the operator's description of the device, with server.host
// filled with the host name where it says "@auto", as kvmd does. A file
// that is missing or broken is null.
func (s *Source) readMeta() map[string]any {
	if s.cfg.MetaPath == "" {
		return nil
	}
	v, err := readYAML(s.cfg.MetaPath)
	s.report("meta", err)
	if err != nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			s.report("meta", fmt.Errorf("%s: not a mapping", s.cfg.MetaPath))
		}
		return map[string]any{}
	}
	if srv, ok := m["server"].(map[string]any); ok && srv["host"] == "@auto" {
		if h, err := s.cfg.FS.Hostname(); err == nil {
			srv["host"] = h
		}
	}
	return m
}

var extraNameRe = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

// readExtras lists the installed add-ons: each directory of ExtrasDir with a
// manifest.yaml, keyed by its name with other characters than letters,
// digits and _ made _. An add-on naming a systemd unit in "daemon" gets
// "enabled" and "started", read from systemd's own files under the root:
// enabled when a *.wants directory of /etc/systemd/system links the unit,
// started while /run/systemd/units/invocation:UNIT exists (systemd keeps
// it for every running unit). No D-Bus, no process spawned.
func (s *Source) readExtras() map[string]any {
	out := map[string]any{}
	if s.cfg.ExtrasDir == "" {
		return out
	}
	ents, err := os.ReadDir(s.cfg.ExtrasDir)
	if err != nil {
		s.report("extras", err)
		return out
	}
	var errs []error
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.IsDir() && e.Name()[0] != '.' {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		v, err := readYAML(filepath.Join(s.cfg.ExtrasDir, name, "manifest.yaml"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("extras %s: manifest is not a mapping", name))
			continue
		}
		if d, ok := m["daemon"].(string); ok && d != "" {
			m["enabled"], m["started"] = s.unitState(d)
		}
		if _, ok := m["port"].(string); ok {
			m["port"] = 0 // a path into kvmd's own config, which this daemon has not
		}
		out[extraNameRe.ReplaceAllString(name, "_")] = m
	}
	s.report("extras", errs...)
	return out
}

func (s *Source) unitState(daemon string) (enabled, started bool) {
	unit := daemon
	if filepath.Ext(unit) == "" {
		unit += ".service"
	}
	if wants, _ := s.cfg.FS.Glob("etc/systemd/system/*.wants/" + unit); len(wants) > 0 {
		enabled = true
	}
	if _, err := s.cfg.FS.Lstat("run/systemd/units/invocation:" + unit); err == nil {
		started = true
	}
	return enabled, started
}

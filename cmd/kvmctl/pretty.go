package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// value is a JSON value with its objects' keys in the order the daemon
// sent them (a map would sort them).
type value struct {
	kind   byte // '{', '[' or 0 for a scalar
	keys   []string
	elems  []*value
	scalar string
}

func parseJSON(data []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		v := &value{kind: byte(t)}
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k.(string))
			}
			e, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			v.elems = append(v.elems, e)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return v, nil
	case string:
		return &value{scalar: text(t)}, nil
	case json.Number:
		return &value{scalar: t.String()}, nil
	case bool:
		return &value{scalar: strconv.FormatBool(t)}, nil
	case nil:
		return &value{scalar: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// text shows a string as it is, but quoted where it could be misread:
// empty, blanks at either end, control characters, or a word that reads
// as another JSON value.
func text(s string) string {
	switch s {
	case "null", "true", "false":
		return strconv.Quote(s)
	}
	return key(s)
}

// key shows an object's key: as it is, but quoted when empty, with blanks
// at either end or with control characters.
func key(s string) string {
	if s == "" || strings.TrimSpace(s) != s || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return strconv.Quote(s)
	}
	return s
}

// inline tells a value shown after its key on one line.
func (v *value) inline() string {
	switch {
	case v.kind == 0:
		return v.scalar
	case len(v.elems) > 0:
		return ""
	case v.kind == '{':
		return "{}"
	}
	return "[]"
}

// lines renders v as nested "key: value" lines, YAML-like: objects indent
// their members by two spaces, list elements begin with "- ".
func (v *value) lines(indent string) []string {
	var out []string
	for i, e := range v.elems {
		in := e.inline()
		if v.kind == '{' {
			k := key(v.keys[i])
			if in != "" {
				out = append(out, indent+k+": "+in)
			} else {
				out = append(out, indent+k+":")
				out = append(out, e.lines(indent+"  ")...)
			}
			continue
		}
		if in != "" {
			out = append(out, indent+"- "+in)
			continue
		}
		sub := e.lines(indent + "  ")
		sub[0] = indent + "- " + strings.TrimPrefix(sub[0], indent+"  ")
		out = append(out, sub...)
	}
	return out
}

// writePretty writes a JSON result for humans.
func writePretty(w io.Writer, raw []byte) error {
	v, err := parseJSON(raw)
	if err != nil {
		return fmt.Errorf("the device's reply is not JSON: %w", err)
	}
	var b strings.Builder
	if in := v.inline(); in != "" {
		b.WriteString(in + "\n")
	}
	for _, l := range v.lines("") {
		b.WriteString(l + "\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

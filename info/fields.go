package info

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The categories of /api/info. hw exists only in the legacy layout; health
// is asked for by name there (it is also inside hw). gpio, usb and video
// are the parts of hw beyond kvmd's; like health they are top-level
// categories in the newer layout (legacy=0) and asked for by name in the
// legacy one.
var (
	common    = []string{"auth", "extras", "fan", "meta", "node", "system", "uptime"}
	hwParts   = []string{"gpio", "health", "usb", "video"}
	legacyAll = sorted(append(append([]string{"hw"}, common...), hwParts...))
	legacyDef = sorted(append([]string{"hw"}, common...))
	newAll    = sorted(append(append([]string(nil), common...), hwParts...))
)

func sorted(s []string) []string { slices.Sort(s); return s }

// UnknownFieldError names a category that does not exist.
type UnknownFieldError struct{ Name string }

func (e *UnknownFieldError) Error() string {
	name := e.Name
	if len(name) > 40 {
		name = name[:40] + "..."
	}
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "?")
	}
	return fmt.Sprintf("unknown category %q", name)
}

// Available returns every category name of a layout.
func Available(legacy bool) []string {
	if legacy {
		return slices.Clone(legacyAll)
	}
	return slices.Clone(newAll)
}

// ParseFields turns the fields parameter into sorted, distinct category
// names: separated by commas, spaces or tabs, any case. Empty means the
// layout's default set: everything, except in the legacy layout the parts
// that are already inside hw.
func ParseFields(arg string, legacy bool) ([]string, error) {
	all, def := newAll, newAll
	if legacy {
		all, def = legacyAll, legacyDef
	}
	var out []string
	for _, f := range strings.FieldsFunc(arg, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		f = strings.ToLower(f)
		if !slices.Contains(all, f) {
			return nil, &UnknownFieldError{Name: f}
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return slices.Clone(def), nil
	}
	slices.Sort(out)
	return out, nil
}

// Fields implements the parsing half of httpd.InfoSource: ParseFields,
// whose answers to the common questions (no fields, one category by its
// name) are made once and shared: never change them.
func (s *Source) Fields(arg string, legacy bool) ([]string, error) {
	if cats, ok := commonFields[legacy][arg]; ok {
		return cats, nil
	}
	return ParseFields(arg, legacy)
}

// commonFields are ParseFields' answers to "" and to each category's
// name, by layout.
var commonFields = func() map[bool]map[string][]string {
	m := map[bool]map[string][]string{}
	for _, legacy := range []bool{false, true} {
		m[legacy] = map[string][]string{}
		for _, arg := range append([]string{""}, Available(legacy)...) {
			cats, err := ParseFields(arg, legacy)
			if err != nil {
				panic(err)
			}
			m[legacy][arg] = cats
		}
	}
	return m
}()

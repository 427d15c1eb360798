package metrics

import (
	"bytes"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The text exposition format, version 0.0.4, as Prometheus reads it
// (prometheus/docs content/docs/instrumenting/exposition_formats.md, and
// what prometheus/common's expfmt writes): per family a HELP line, a TYPE
// line and its samples; families sorted by name, the samples of a family
// sorted by their label values; HELP escapes backslash and newline, label
// values backslash, newline and double quote; values as Go's shortest 'g'
// representation, with NaN, +Inf and -Inf.

// Types of a family, as the TYPE line names them.
const (
	typeGauge   = "gauge"
	typeCounter = "counter"
	typeSummary = "summary"
)

// desc describes a family: its name, HELP text, type and label names. The
// label names are in lexical order, as the samples are sorted by their
// values in that order (TestLabelsSorted holds kvmd's families to it).
type desc struct {
	name, help, typ string
	labels          []string
}

func newDesc(name, typ, help string, labels ...string) *desc {
	return &desc{name: name, help: help, typ: typ, labels: labels}
}

// sample is one sample of a family, or, for a summary, its quantiles, sum
// and count.
type sample struct {
	values []string
	value  float64
	sum    *summary
}

// summary is a summary's value: the quantiles (phi, value) in increasing
// phi, the sum and the count of the observations.
type summary struct {
	quantiles [][2]float64
	sum       float64
	count     uint64
}

// family is a desc with the samples of one scrape.
type family struct {
	*desc
	samples []sample
}

// exposition gathers the families of one scrape, by name.
type exposition struct {
	families map[string]*family
}

func newExposition() *exposition {
	return &exposition{families: map[string]*family{}}
}

// add adds a sample of d with the label values (in d.labels' order). A
// second desc with a name already there adds to the family of the first.
func (e *exposition) add(d *desc, v float64, values ...string) {
	f := e.family(d)
	f.samples = append(f.samples, sample{values: values, value: v})
}

// addSummary adds a summary's sample.
func (e *exposition) addSummary(d *desc, s summary, values ...string) {
	f := e.family(d)
	f.samples = append(f.samples, sample{values: values, sum: &s})
}

func (e *exposition) family(d *desc) *family {
	f, ok := e.families[d.name]
	if !ok {
		f = &family{desc: d}
		e.families[d.name] = f
	}
	return f
}

// write writes the families that have samples, sorted by name, each with
// one Write.
func (e *exposition) write(w io.Writer) error {
	names := make([]string, 0, len(e.families))
	for name, f := range e.families {
		if len(f.samples) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, name := range names {
		b.Reset()
		e.families[name].appendText(&b)
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// appendText writes the family in the text format to b.
func (f *family) appendText(b *bytes.Buffer) {
	slices.SortStableFunc(f.samples, func(x, y sample) int {
		return slices.Compare(x.values, y.values)
	})
	b.WriteString("# HELP ")
	b.WriteString(f.name)
	b.WriteByte(' ')
	helpEscaper.WriteString(b, f.help)
	b.WriteString("\n# TYPE ")
	b.WriteString(f.name)
	b.WriteByte(' ')
	b.WriteString(f.typ)
	b.WriteByte('\n')
	for _, s := range f.samples {
		if s.sum == nil {
			f.appendSample(b, "", s.values, "", 0, s.value)
			continue
		}
		for _, q := range s.sum.quantiles {
			f.appendSample(b, "", s.values, "quantile", q[0], q[1])
		}
		f.appendSample(b, "_sum", s.values, "", 0, s.sum.sum)
		f.appendSample(b, "_count", s.values, "", 0, float64(s.sum.count))
	}
}

// appendSample writes one line: the name with suffix, the labels (and an
// extra one, a summary's quantile, when extra is set), the value.
func (f *family) appendSample(b *bytes.Buffer, suffix string, values []string, extra string, extraValue, v float64) {
	b.WriteString(f.name)
	b.WriteString(suffix)
	sep := byte('{')
	for i, name := range f.labels {
		b.WriteByte(sep)
		sep = ','
		b.WriteString(name)
		b.WriteString(`="`)
		value := ""
		if i < len(values) {
			value = values[i]
		}
		// An invalid UTF-8 sequence in a label value would fail the whole
		// scrape in Prometheus: replace it, as nothing here should have
		// one.
		labelEscaper.WriteString(b, strings.ToValidUTF8(value, string(utf8.RuneError)))
		b.WriteByte('"')
	}
	if extra != "" {
		b.WriteByte(sep)
		sep = ','
		b.WriteString(extra)
		b.WriteString(`="`)
		b.Write(appendFloat(b.AvailableBuffer(), extraValue))
		b.WriteByte('"')
	}
	if sep == ',' {
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.Write(appendFloat(b.AvailableBuffer(), v))
	b.WriteByte('\n')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// appendFloat appends v as Prometheus writes it: NaN, +Inf, -Inf, or the
// shortest representation that reads back as v ('g' format), negative
// zero as 0.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case v == 0:
		return append(b, '0')
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

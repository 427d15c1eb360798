package metrics

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestAppendFloat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{0.25, "0.25"},
		{62.322, "62.322"},
		{12.1, "12.1"},
		{2911, "2911"},
		{3976179712, "3.976179712e+09"},
		{1e21, "1e+21"},
		{1.5e-7, "1.5e-07"},
		{math.MaxInt64, "9.223372036854776e+18"},
		{math.MaxUint64, "1.8446744073709552e+19"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
	} {
		if got := string(appendFloat(nil, tc.v)); got != tc.want {
			t.Errorf("appendFloat(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestText is a table of expositions: escaping of HELP and label values,
// labels, the order of families and samples, empty families, a summary.
func TestText(t *testing.T) {
	g := newDesc("b_ratio", typeGauge, "A gauge with a \\ backslash,\na newline and \"quotes\".", "k", "l")
	c := newDesc("a_total", typeCounter, "A counter.")
	e := newDesc("c_empty", typeGauge, "Never a sample.")
	s := newDesc("d_seconds", typeSummary, "A summary.")
	x := newExposition()
	x.family(e)
	x.add(g, math.Inf(1), "z", "1")
	x.add(g, 0.5, "a\\b", "line\nbreak")
	x.add(g, math.NaN(), `say "hi"`, "")
	x.add(g, -2, "a", "\xff")
	x.add(c, 1234567)
	x.addSummary(s, summary{quantiles: [][2]float64{{0, 0.001}, {0.25, 0.002}, {0.5, 0.003}, {0.75, 0.004}, {1, 0.5}}, sum: 1.5, count: 1234567})
	var b bytes.Buffer
	if err := x.write(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_total A counter.
# TYPE a_total counter
a_total 1.234567e+06
# HELP b_ratio A gauge with a \\ backslash,\na newline and "quotes".
# TYPE b_ratio gauge
b_ratio{k="a",l="\ufffd"} -2
b_ratio{k="a\\b",l="line\nbreak"} 0.5
b_ratio{k="say \"hi\"",l=""} NaN
b_ratio{k="z",l="1"} +Inf
# HELP d_seconds A summary.
# TYPE d_seconds summary
d_seconds{quantile="0"} 0.001
d_seconds{quantile="0.25"} 0.002
d_seconds{quantile="0.5"} 0.003
d_seconds{quantile="0.75"} 0.004
d_seconds{quantile="1"} 0.5
d_seconds_sum 1.5
d_seconds_count 1.234567e+06
`
	want = strings.ReplaceAll(want, `\ufffd`, "\ufffd")
	if got := b.String(); got != want {
		t.Errorf("(-want +got):\n%s", lineDiff(want, got))
	}
	checkSyntax(t, b.String())
	promtoolCheck(t, b.Bytes())
}

// TestLabelsSorted: the label names of kvmd's families are in lexical
// order, as Prometheus's clients write them and as the samples are sorted.
func TestLabelsSorted(t *testing.T) {
	for _, d := range newCollector(Config{}).all() {
		if !slices.IsSorted(d.labels) {
			t.Errorf("%s: labels %q not sorted", d.name, d.labels)
		}
	}
}

package report

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// A figure added over several runs is one row with its median and spread.
func TestTableRowPerFigure(t *testing.T) {
	var tab Table
	tab.Add("s", "f", "ms", "note", 3)
	tab.Add("s", "f", "ms", "note", 1, 2)
	tab.Add("s", "g", "", "", 7)
	var b strings.Builder
	if err := tab.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"| s | f | 2.00 ms | 1.00–3.00 | 3 | note |", "| s | g | 7.00 | 7.00–7.00 | 1 |  |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "| s | f |"); n != 1 {
		t.Errorf("figure f printed %d times, want once", n)
	}
}

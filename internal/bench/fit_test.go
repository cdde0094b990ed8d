package main

import (
	"math"
	"testing"
)

func TestFit(t *testing.T) {
	for _, tc := range []struct {
		xs, ys []float64
		a, b   float64
	}{
		{[]float64{3, 10, 100}, []float64{3*12 + 40, 10*12 + 40, 100*12 + 40}, 40, 12},
		{[]float64{5, 5}, []float64{1, 3}, 2, 0}, // one size: the mean, no slope
	} {
		a, b := fit(tc.xs, tc.ys)
		if math.Abs(a-tc.a) > 1e-9 || math.Abs(b-tc.b) > 1e-9 {
			t.Errorf("fit(%v, %v) = %v + %v·x, want %v + %v·x", tc.xs, tc.ys, a, b, tc.a, tc.b)
		}
	}
}

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// table is a Markdown table: readable in a terminal, pasteable into an issue.
type table struct {
	title  string
	header []string
	rows   [][]string
	notes  []string
	data   any // the section's numbers for the JSON results, if any
}

func newTable(title string, header ...string) *table {
	return &table{title: title, header: header}
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// note adds a line printed under the table.
func (t *table) note(format string, a ...any) { t.notes = append(t.notes, fmt.Sprintf(format, a...)) }

func (t *table) print(w io.Writer) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i := range min(len(r), len(widths)) {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, w := range widths {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", w-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintf(w, "\n### %s\n\n", t.title)
	line(t.header)
	var sep strings.Builder
	sep.WriteString("|")
	for i, wd := range widths {
		if i == 0 {
			sep.WriteString(strings.Repeat("-", wd+2) + "|")
		} else {
			sep.WriteString(strings.Repeat("-", wd+1) + ":|")
		}
	}
	fmt.Fprintln(w, sep.String())
	for _, r := range t.rows {
		line(r)
	}
	for _, n := range t.notes {
		fmt.Fprintln(w, "\n"+n)
	}
}

// Formatting helpers: rates get thousands separators, durations a unit that
// suits their size.

func fmtRate(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	if v >= 100 {
		return fmtInt(int64(math.Round(v)))
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtInt(n int64) string {
	s := fmt.Sprintf("%d", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

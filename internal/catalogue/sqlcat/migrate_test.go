package sqlcat

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestEmbeddedMigrations checks that both databases get the same versions
// under the same names, whatever text each needs.
func TestEmbeddedMigrations(t *testing.T) {
	var want []string
	for _, d := range dialectNames {
		ms, err := loadMigrations(migrationFiles, d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if len(ms) == 0 {
			t.Fatalf("%s: no migrations", d)
		}
		var got []string
		for i, m := range ms {
			if m.version != i+1 || strings.TrimSpace(m.sql) == "" {
				t.Errorf("%s: migration %d is %+v", d, i, m)
			}
			got = append(got, m.name)
		}
		if want == nil {
			want = got
		} else if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s migrations %v, %s has %v", d, got, dialectNames[0], want)
		}
	}
}

func TestLoadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	ok := fstest.MapFS{
		"migrations/0001_init.sqlite.sql":   file("-- sqlite 1"),
		"migrations/0001_init.postgres.sql": file("-- postgres 1"),
		"migrations/0002_more.sql":          file("-- common 2"),
	}
	for d, want := range map[string]string{"sqlite": "-- sqlite 1|-- common 2", "postgres": "-- postgres 1|-- common 2"} {
		ms, err := loadMigrations(ok, d)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.sql)
		}
		if strings.Join(got, "|") != want {
			t.Errorf("%s: %q, want %q", d, strings.Join(got, "|"), want)
		}
	}
	if _, err := loadMigrations(ok, "mysql"); err == nil {
		t.Error("loaded migrations for an unknown dialect")
	}

	for name, fsys := range map[string]fstest.MapFS{
		"gap": {
			"migrations/0001_init.sql":  file("x"),
			"migrations/0003_three.sql": file("x"),
		},
		"one dialect only": {
			"migrations/0001_init.sqlite.sql": file("x"),
		},
		"common and per dialect": {
			"migrations/0001_init.sql":          file("x"),
			"migrations/0001_init.sqlite.sql":   file("x"),
			"migrations/0001_init.postgres.sql": file("x"),
		},
		"two names": {
			"migrations/0001_init.sqlite.sql":    file("x"),
			"migrations/0001_other.postgres.sql": file("x"),
		},
		"unknown dialect": {
			"migrations/0001_init.sql":         file("x"),
			"migrations/0002_more.sqlite3.sql": file("x"),
		},
		"bad name": {
			"migrations/1_init.sql": file("x"),
		},
		"not sql": {
			"migrations/0001_init.sql": file("x"),
			"migrations/README":        file("x"),
		},
	} {
		if _, err := loadMigrations(fsys, "sqlite"); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

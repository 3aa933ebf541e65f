package failover

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/storage/storagetest"
)

// TestDatabaseDiskFull: the log's leaves table is moved to a tablespace
// on a 1 MiB tmpfs, so PostgreSQL itself runs out of space (SQLSTATE
// 53100). Appends are then answered 503 disk_full with Retry-After
// (nothing acknowledged), never 500; once the table has room again, the
// same bytes are accepted. It mounts a tmpfs, so it needs root and a
// PostgreSQL on this machine; it skips without them unless CI is set.
func TestDatabaseDiskFull(t *testing.T) {
	store := storagetest.PostgresURL(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the disk-full test mounts a tmpfs: run it as root in CI")
		}
		t.Skip("the disk-full test mounts a tmpfs: needs root")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dataDir, host string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(store); u != nil {
		host = u.Hostname()
	}
	fi, err := os.Stat(dataDir)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		if os.Getenv("CI") != "" {
			t.Fatalf("the disk-full test needs the PostgreSQL server on this machine (data directory %s): %v", dataDir, err)
		}
		t.Skipf("the PostgreSQL server is not on this machine: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	mnt := filepath.Join(t.TempDir(), "small")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount tmpfs: %v\n%s", err, out)
		}
		t.Skipf("mount tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	if err := os.Chown(mnt, int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}
	// The temporary folder's parents must let the database's user in.
	for d := filepath.Dir(mnt); d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o001)
		}
	}
	var r [6]byte
	rand.Read(r[:])
	ts := "custody_small_" + hex.EncodeToString(r[:])
	if _, err := conn.Exec(ctx, "CREATE TABLESPACE "+ts+" LOCATION '"+mnt+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), store)
		if err == nil {
			c.Exec(context.Background(), "ALTER TABLE custody_leaves SET TABLESPACE pg_default")
			c.Exec(context.Background(), "DROP TABLESPACE "+ts)
			c.Close(context.Background())
		}
	})

	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	if _, err := conn.Exec(ctx, "ALTER TABLE custody_leaves SET TABLESPACE "+ts); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, store, time.Second)
	cl, err := client.New(s.URL, vkey, &client.Options{Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	cs := newCast(t, cl, admin, 1)
	// Receipts of about 1 KiB fill 1 MiB in about a thousand appends.
	var full []byte
	var answer api.Error
	hc := &http.Client{Timeout: 30 * time.Second}
	for n := 0; n < 20000 && full == nil; n++ {
		_, env := cs.pending(t, 0, n)
		resp, err := hc.Post(s.URL+api.PathEntries, "application/json", bytes.NewReader(env))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			continue
		case http.StatusServiceUnavailable:
			if err := json.Unmarshal(body, &answer); err != nil {
				t.Fatalf("503 without a JSON body: %s", body)
			}
			if answer.ReasonCode != api.CodeDiskFull {
				t.Fatalf("answer %d %s, want 503 disk_full", resp.StatusCode, body)
			}
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("503 disk_full without Retry-After")
			}
			full = env
		default:
			t.Fatalf("append %d on a full database: %d %s", n, resp.StatusCode, body)
		}
	}
	if full == nil {
		t.Fatal("the tablespace never filled")
	}
	t.Logf("full: %s", answer.Reason)
	// Room again: the same bytes are accepted.
	if _, err := conn.Exec(ctx, "ALTER TABLE custody_leaves SET TABLESPACE pg_default"); err != nil {
		t.Fatal(err)
	}
	var res *client.Receipt
	for range 50 {
		if res, err = cl.Append(ctx, full); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !res.Accepted() {
		t.Fatalf("after space was freed: %v", err)
	}
}

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/go-sql-driver/mysql"
	taws "github.com/transparency-dev/tessera/storage/aws"
)

// awsDriver makes Tessera's AWS driver on the MySQL server of c.mysqlDSN
// and the S3-compatible server at c.s3Endpoint, configured the way
// Tessera's own conformance binary (cmd/conformance/aws) configures a
// non-AWS S3: a static key, region us-east-1, path-style requests. It
// creates a new database and a new bucket for the run; the returned
// cleanup drops the database and empties and removes the bucket.
func awsDriver(ctx context.Context, c config) (*peerDriver, error) {
	if c.mysqlDSN == "" || c.s3Endpoint == "" {
		return nil, errors.New("--driver aws needs --mysql DSN and --s3-endpoint URL (scripts/bench-peers.sh starts both)")
	}
	base, err := mysql.ParseDSN(c.mysqlDSN)
	if err != nil {
		return nil, fmt.Errorf("--mysql %q: %w", c.mysqlDSN, err)
	}
	var r [6]byte
	rand.Read(r[:])
	name := "tessera_bench_" + hex.EncodeToString(r[:])
	admin, err := sql.Open("mysql", base.FormatDSN())
	if err != nil {
		return nil, err
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, fmt.Errorf("creating database %s on %s: %w", name, base.Addr, err)
	}
	cfg := base.Clone()
	cfg.DBName = name

	const region = "us-east-1"
	s3Opts := func(o *s3.Options) {
		o.BaseEndpoint = aws.String(c.s3Endpoint)
		o.Credentials = credentials.NewStaticCredentialsProvider(c.s3Access, c.s3Secret, "")
		o.Region = region
		o.UsePathStyle = true
	}
	sdk := &aws.Config{Region: region}
	client := s3.NewFromConfig(*sdk, s3Opts)
	bucket := "tessera-bench-" + hex.EncodeToString(r[:])
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		admin.ExecContext(ctx, "DROP DATABASE "+name)
		admin.Close()
		return nil, fmt.Errorf("creating bucket %s at %s: %w", bucket, c.s3Endpoint, err)
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		admin.ExecContext(ctx, "DROP DATABASE "+name)
		admin.Close()
		emptyBucket(ctx, client, bucket)
		client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	}
	// Tessera's integration writes tiles and bundles to S3 from many
	// goroutines at once; net/http's default transport keeps only two idle
	// connections per host, so most would open a new one each time.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	drv, err := taws.New(ctx, taws.Config{
		SDKConfig:    sdk,
		S3Options:    s3Opts,
		Bucket:       bucket,
		DSN:          cfg.FormatDSN(),
		MaxOpenConns: c.mysqlConns,
		MaxIdleConns: 16,
		HTTPClient:   hc,
	})
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("aws driver: %w", err)
	}
	return &peerDriver{driver: drv, cleanup: cleanup, stats: func(ctx context.Context) map[string]float64 { return mysqlStatus(ctx, admin) },
		futureAck: "future resolved (sequenced: the batch committed to MySQL's Seq table, innodb_flush_log_at_trx_commit=1; integration to S3 follows)"}, nil
}

// mysqlStatus reads the server's counters of durable writes: redo log
// fsyncs and bytes, all InnoDB fsyncs, and commits.
func mysqlStatus(ctx context.Context, db *sql.DB) map[string]float64 {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_fsyncs', 'Innodb_os_log_written', 'Innodb_data_fsyncs', 'Innodb_log_writes', 'Com_commit', 'Innodb_rows_inserted', 'Innodb_rows_updated', 'Innodb_rows_deleted')")
	if err != nil {
		return nil
	}
	defer rows.Close()
	m := map[string]float64{}
	for rows.Next() {
		var k string
		var v float64
		if rows.Scan(&k, &v) == nil {
			m[k] = v
		}
	}
	return m
}

// emptyBucket deletes every object in bucket.
func emptyBucket(ctx context.Context, client *s3.Client, bucket string) {
	var token *string
	for {
		l, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), ContinuationToken: token})
		if err != nil || len(l.Contents) == 0 {
			return
		}
		ids := make([]types.ObjectIdentifier, 0, len(l.Contents))
		for _, o := range l.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: ids}}); err != nil {
			return
		}
		if l.NextContinuationToken == nil {
			return
		}
		token = l.NextContinuationToken
	}
}

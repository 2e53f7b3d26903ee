package dbx

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/herald-notify/herald/internal/ids"
)

// Notification ids are bytea in PostgreSQL and strings everywhere else.
//
// A notification id is "n_" + 64 hex digits (ids.NotificationID: the key hash
// and the run id; ids.CampaignNotificationID: a hash). Spelled out it is a
// 67-byte text value in every row and index entry that names a notification;
// its 32 bytes take 33. Nine of them go with an in-app + email notification
// (its row, its two deliveries, its inbox item: heap and key) and four more
// while its dedup window lasts (docs/retention.md, sixth round).
//
// The conversion lives here, once, in two halves:
//
//   - Parameters: pgx sends every Go string as text, whatever the
//     parameter's type, and PostgreSQL would read "n_…" as 66 bytes. So the
//     handle the store runs on (WithNotificationIDs) marks each string
//     argument that spells a notification id, and the bytea codec of every
//     connection (registerNotificationIDs, from the pools' AfterConnect)
//     sends a marked one as its 32 bytes; bound to a text parameter (a
//     column that names other things too) a marked id is still its text.
//     Strings inside arrays (bytea[] parameters) and COPY rows are encoded
//     in binary, through the codec, without a mark.
//   - Results: a 32-byte bytea scanned into a string is spelled out as the
//     id.
//
// A string that is not an id, bound to or scanned from a bytea, is its bytes,
// as pgx would have it (tests name notifications "n1"). The other bytea
// columns (secrets, hashes) are bound and scanned as []byte, which the codec
// leaves to pgx.

// registerNotificationIDs makes bytea (and bytea[]) carry notification ids as
// strings on the connection's type map.
func registerNotificationIDs(m *pgtype.Map) {
	bytea := &pgtype.Type{Name: "bytea", OID: pgtype.ByteaOID, Codec: notificationIDCodec{}}
	m.RegisterType(bytea)
	m.RegisterType(&pgtype.Type{Name: "_bytea", OID: pgtype.ByteaArrayOID, Codec: &pgtype.ArrayCodec{ElementType: bytea}})
}

// AfterConnect is a pgx AfterConnect hook that registers the codec.
func AfterConnect(_ context.Context, conn *pgx.Conn) error {
	registerNotificationIDs(conn.TypeMap())
	return nil
}

// notificationIDBytes is what a string is as a bytea: a notification id's
// bytes, or any other string's own bytes.
func notificationIDBytes(s string) []byte {
	if b, ok := ids.NotificationIDBytes(s); ok {
		return b
	}
	return []byte(s)
}

// notificationIDString is what a bytea is as a string: a notification id
// spelled out for ids.NotificationIDSize bytes, the bytes themselves otherwise.
func notificationIDString(b []byte) string {
	if len(b) == ids.NotificationIDSize {
		return ids.NotificationIDFromBytes(b)
	}
	return string(b)
}

// isNotificationID reports whether s spells a notification id.
func isNotificationID(s string) bool {
	_, ok := ids.NotificationIDBytes(s)
	return ok
}

// notificationIDArg is a string argument marked as a notification id
// (markNotificationIDs): pgx picks a parameter's format by its type for it,
// as it does for everything but a plain string.
type notificationIDArg string

// markNotificationIDs marks the arguments that spell a notification id
// (copying args only when one does).
func markNotificationIDs(args []any) []any {
	var out []any
	for i, a := range args {
		var marked any
		switch v := a.(type) {
		case string:
			if isNotificationID(v) {
				marked = notificationIDArg(v)
			}
		case *string:
			if v != nil && isNotificationID(*v) {
				marked = notificationIDArg(*v)
			}
		}
		if marked != nil {
			if out == nil {
				out = slices.Clone(args)
			}
			out[i] = marked
		}
	}
	if out == nil {
		return args
	}
	return out
}

type notificationIDCodec struct{ pgtype.ByteaCodec }

func (c notificationIDCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	switch value.(type) {
	case string, notificationIDArg:
		if format == pgtype.TextFormatCode {
			return encodeNotificationIDText{}
		}
		return encodeNotificationIDBinary{}
	}
	return c.ByteaCodec.PlanEncode(m, oid, format, value)
}

func (c notificationIDCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*string); ok {
		return scanNotificationID{inner: c.ByteaCodec.PlanScan(m, oid, format, new([]byte))}
	}
	return c.ByteaCodec.PlanScan(m, oid, format, target)
}

func stringOf(value any) string {
	if v, ok := value.(notificationIDArg); ok {
		return string(v)
	}
	return value.(string)
}

type encodeNotificationIDBinary struct{}

func (encodeNotificationIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, notificationIDBytes(stringOf(value))...), nil
}

type encodeNotificationIDText struct{}

func (encodeNotificationIDText) Encode(value any, buf []byte) ([]byte, error) {
	return hex.AppendEncode(append(buf, `\x`...), notificationIDBytes(stringOf(value))), nil
}

type scanNotificationID struct{ inner pgtype.ScanPlan }

func (p scanNotificationID) Scan(src []byte, dst any) error {
	if src == nil {
		return fmt.Errorf("dbx: cannot scan NULL into *string")
	}
	var b []byte
	if err := p.inner.Scan(src, &b); err != nil {
		return err
	}
	*dst.(*string) = notificationIDString(b)
	return nil
}

// WithNotificationIDs is db with the notification ids among its statements'
// arguments marked (markNotificationIDs), its transactions' too.
func WithNotificationIDs(db DB) DB {
	switch v := db.(type) {
	case idDB, idTx:
		return db
	case pgx.Tx:
		return idTx{v}
	}
	return idDB{db}
}

type idDB struct{ DB }

func (d idDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return d.DB.Exec(ctx, sql, markNotificationIDs(args)...)
}

func (d idDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.DB.Query(ctx, sql, markNotificationIDs(args)...)
}

func (d idDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.DB.QueryRow(ctx, sql, markNotificationIDs(args)...)
}

func (d idDB) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.DB.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return idTx{tx}, nil
}

// idTx is a transaction of idDB (pgx.Tx's other methods as they are).
type idTx struct{ pgx.Tx }

func (t idTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(ctx, sql, markNotificationIDs(args)...)
}

func (t idTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(ctx, sql, markNotificationIDs(args)...)
}

func (t idTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(ctx, sql, markNotificationIDs(args)...)
}

func (t idTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return idTx{tx}, nil
}

// Unwrap is the handle WithNotificationIDs wrapped (db itself otherwise): the
// pool, for the statements that need one of its connections of their own.
func Unwrap(db DB) DB {
	switch v := db.(type) {
	case idDB:
		return v.DB
	case idTx:
		return v.Tx
	}
	return db
}

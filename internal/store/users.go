package store

import (
	"context"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
)

// User is a tenant's recipient and their addresses.
type User struct {
	TenantID  string    `json:"-"`
	UserID    string    `json:"user_id"`
	Name      *string   `json:"name"`
	Email     *string   `json:"email"`
	Phone     *string   `json:"phone"`
	Locale    *string   `json:"locale"`
	Timezone  *string   `json:"timezone"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

const userColumns = `tenant_id, user_id, name, email, phone, locale, timezone, created_at, updated_at`

func scanUser(row interface{ Scan(...any) error }) (User, error) {
	var u User
	err := row.Scan(&u.TenantID, &u.UserID, &u.Name, &u.Email, &u.Phone, &u.Locale, &u.Timezone, &u.CreatedAt, &u.UpdatedAt)
	return u, dbx.NotFound(err)
}

// UpsertUser creates or replaces a user's profile; created reports a new user.
func (s *Store) UpsertUser(ctx context.Context, u User) (User, bool, error) {
	row := s.db.QueryRow(ctx, `
		INSERT INTO users (tenant_id, user_id, name, email, phone, locale, timezone)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET
			name = EXCLUDED.name, email = EXCLUDED.email, phone = EXCLUDED.phone,
			locale = EXCLUDED.locale, timezone = EXCLUDED.timezone, updated_at = now()
		RETURNING `+userColumns+`, (xmax = 0)`,
		u.TenantID, u.UserID, u.Name, u.Email, u.Phone, u.Locale, u.Timezone)
	var out User
	var created bool
	err := row.Scan(&out.TenantID, &out.UserID, &out.Name, &out.Email, &out.Phone, &out.Locale, &out.Timezone, &out.CreatedAt, &out.UpdatedAt, &created)
	return out, created, err
}

// GetUser returns one of the tenant's users.
func (s *Store) GetUser(ctx context.Context, tenantID, userID string) (User, error) {
	return scanUser(s.db.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE tenant_id = $1 AND user_id = $2`, tenantID, userID))
}

// UserExists is the cheap check on the accept path.
func (s *Store) UserExists(ctx context.Context, tenantID, userID string) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE tenant_id = $1 AND user_id = $2)`, tenantID, userID).Scan(&ok)
	return ok, err
}

// InsertUsers creates many users in one statement (bulk loads, tests, the
// bench); existing users are left as they are.
func (s *Store) InsertUsers(ctx context.Context, tenantID string, users []User) error {
	ids := make([]string, len(users))
	emails, phones, tzs := make([]*string, len(users)), make([]*string, len(users)), make([]*string, len(users))
	for i, u := range users {
		ids[i], emails[i], phones[i], tzs[i] = u.UserID, u.Email, u.Phone, u.Timezone
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO users (tenant_id, user_id, email, phone, timezone)
		SELECT $1, u, e, p, tz FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS t(u, e, p, tz)
		ON CONFLICT DO NOTHING`, tenantID, ids, emails, phones, tzs)
	return err
}

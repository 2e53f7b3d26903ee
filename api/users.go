package api

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

type putUserRequest struct {
	Name     *string `json:"name"`
	Email    *string `json:"email"`
	Phone    *string `json:"phone"`
	Locale   *string `json:"locale"`
	Timezone *string `json:"timezone"`
}

func (r putUserRequest) validate() *Error {
	if r.Name != nil && len(*r.Name) > 200 {
		return badField("name", "invalid_field", "name must be at most 200 bytes")
	}
	if r.Email != nil {
		if err := validEmail(*r.Email); err != nil {
			return err
		}
	}
	if r.Phone != nil {
		if err := validPhone(*r.Phone); err != nil {
			return err
		}
	}
	if r.Locale != nil {
		if err := validLocale(*r.Locale); err != nil {
			return err
		}
	}
	if r.Timezone != nil {
		if err := validTimezone(*r.Timezone); err != nil {
			return err
		}
	}
	return nil
}

// putUser creates or replaces a user's profile (PUT semantics: omitted fields are cleared).
func (s *Server) putUser(c *gin.Context) {
	userID := c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		s.abort(c, err)
		return
	}
	var req putUserRequest
	if err := decodeJSON(c, &req); err != nil {
		s.abort(c, err)
		return
	}
	if err := req.validate(); err != nil {
		s.abort(c, err)
		return
	}
	u, created, err := s.store.UpsertUser(c.Request.Context(), store.User{
		TenantID: tenantOf(c).ID, UserID: userID, Name: req.Name, Email: req.Email,
		Phone: req.Phone, Locale: req.Locale, Timezone: req.Timezone,
	})
	if err != nil {
		s.abort(c, err)
		return
	}
	if s.users != nil {
		locale := ""
		if req.Locale != nil {
			locale = *req.Locale
		}
		s.users.Add(tenantOf(c).ID+"/"+userID, locale)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, u)
}

func (s *Server) getUser(c *gin.Context) {
	userID := c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		s.abort(c, err)
		return
	}
	u, err := s.store.GetUser(c.Request.Context(), tenantOf(c).ID, userID)
	if errors.Is(err, herald.ErrNotFound) {
		s.abort(c, notFound("user"))
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}

// userExists is the accept path's recipient check; positive answers are cached briefly.
func (s *Server) userExists(c *gin.Context, tenantID, userID string) (bool, error) {
	_, ok, err := s.userLocale(c, tenantID, userID)
	return ok, err
}

// userLocale is the user's locale ("" when unset) and whether the user exists,
// for the accept path: the locale picks the template variant rendered at submit
// time, as the worker will pick it. Positive answers are cached briefly (a
// profile saved through this process updates its entry at once).
func (s *Server) userLocale(c *gin.Context, tenantID, userID string) (string, bool, error) {
	key := tenantID + "/" + userID
	if s.users != nil {
		if locale, ok := s.users.Get(key); ok {
			return locale, true, nil
		}
	}
	u, err := s.store.GetUser(c.Request.Context(), tenantID, userID)
	if errors.Is(err, herald.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	locale := ""
	if u.Locale != nil {
		locale = *u.Locale
	}
	if s.users != nil {
		s.users.Add(key, locale)
	}
	return locale, true, nil
}

-- Restores users.tenant_id → tenants (ON DELETE CASCADE). Users whose tenant is
-- gone (possible while the constraint was dropped) would make the constraint
-- fail; they are deleted first, as the cascade would have deleted them.
DELETE FROM users u WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = u.tenant_id);
ALTER TABLE users ADD CONSTRAINT users_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;

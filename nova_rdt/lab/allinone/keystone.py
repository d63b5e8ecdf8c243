"""Keystone: fernet tokens, bootstrapped as devstack bootstraps it.

``keystone-manage db_sync``, ``fernet_setup``, ``credential_setup`` and
``bootstrap`` (the admin user, project and role, the identity service and
its endpoint), then, through the API, what devstack's
``create_keystone_accounts`` and each service's ``create_*_accounts``
add: the ``service`` project with one user per service (roles admin and
service), the ``demo`` project with its ``demo`` user (role member), and
the catalog.
"""

from __future__ import annotations

import os

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import uwsgi

REGION = "RegionOne"
ADMIN = "admin"
SERVICE_PROJECT = "service"
MEMBER_PROJECT = "demo"
MEMBER_USER = "demo"
DOMAIN = "Default"


class Keystone:
    def __init__(self, etc: str, data: str, sup, db_url: str,
                 password: str, pythonpath: list[str]):
        self.etc = etc
        self.data = data
        self.db_url = db_url
        self.password = password
        self.conf = os.path.join(etc, "keystone.conf")
        self.api = uwsgi.Api("keystone", "keystone.wsgi.api:application",
                             etc, sup, {"OS_KEYSTONE_CONFIG_DIR": etc},
                             pythonpath)

    @property
    def url(self) -> str:
        return self.api.url

    def configure(self) -> None:
        ini.write(self.conf, {
            "DEFAULT": {"debug": True, "use_stderr": True},
            "database": {"connection": self.db_url},
            "token": {"provider": "fernet"},
            "fernet_tokens": {"key_repository": os.path.join(
                self.data, "fernet-keys")},
            "fernet_receipts": {"key_repository": os.path.join(
                self.data, "fernet-keys")},
            "credential": {"key_repository": os.path.join(
                self.data, "credential-keys")},
            "identity": {"password_hash_rounds": 4},
        })

    def manage_steps(self) -> list[list[str]]:
        """keystone-manage, in order (the database first)."""
        base = ["keystone-manage", "--config-file", self.conf]
        return [
            base + ["db_sync"],
            base + ["fernet_setup", "--keystone-user", "root",
                    "--keystone-group", "root"],
            base + ["credential_setup", "--keystone-user", "root",
                    "--keystone-group", "root"],
            base + ["bootstrap", "--bootstrap-password", self.password,
                    "--bootstrap-username", ADMIN,
                    "--bootstrap-project-name", ADMIN,
                    "--bootstrap-role-name", ADMIN,
                    "--bootstrap-service-name", "keystone",
                    "--bootstrap-region-id", REGION,
                    "--bootstrap-admin-url", self.url,
                    "--bootstrap-public-url", self.url,
                    "--bootstrap-internal-url", self.url],
        ]

    def admin_auth(self) -> dict:
        return {"auth_url": self.url + "/v3", "username": ADMIN,
                "password": self.password, "project_name": ADMIN,
                "user_domain_name": DOMAIN, "project_domain_name": DOMAIN}

    def member_auth(self) -> dict:
        return {"auth_url": self.url + "/v3", "username": MEMBER_USER,
                "password": self.password, "project_name": MEMBER_PROJECT,
                "user_domain_name": DOMAIN, "project_domain_name": DOMAIN}

    def populate(self, services: dict[str, tuple[str, str]]) -> None:
        """Projects, users, roles and the catalog.

        ``services``: service type -> (service user name, endpoint URL).
        """
        import openstack

        conn = openstack.connect(region_name=REGION, **self.admin_auth())
        try:
            idt = conn.identity
            roles = {r.name: r for r in idt.roles()}
            for name in ("member", "reader", "service"):
                if name not in roles:
                    roles[name] = idt.create_role(name=name)
            domain = idt.find_domain(DOMAIN.lower()) or next(
                d for d in idt.domains() if d.name == DOMAIN)
            service_project = idt.create_project(
                name=SERVICE_PROJECT, domain_id=domain.id)
            member_project = idt.create_project(
                name=MEMBER_PROJECT, domain_id=domain.id)
            demo = idt.create_user(name=MEMBER_USER, password=self.password,
                                   domain_id=domain.id,
                                   default_project_id=member_project.id)
            idt.assign_project_role_to_user(member_project, demo,
                                            roles["member"])
            admin = idt.find_user(ADMIN)
            idt.assign_project_role_to_user(member_project, admin,
                                            roles["admin"])
            for stype, (user, url) in services.items():
                u = idt.create_user(name=user, password=self.password,
                                    domain_id=domain.id)
                for role in ("admin", "service"):
                    idt.assign_project_role_to_user(service_project, u,
                                                    roles[role])
                svc = idt.create_service(name=user, type=stype,
                                         is_enabled=True)
                for interface in ("public", "internal", "admin"):
                    idt.create_endpoint(service_id=svc.id, url=url,
                                        interface=interface,
                                        region_id=REGION)
        finally:
            conn.close()

    def authtoken(self, user: str) -> dict:
        """[keystone_authtoken] of a service whose user is ``user``."""
        return {"www_authenticate_uri": self.url, "auth_url": self.url,
                "auth_type": "password", "username": user,
                "password": self.password, "project_name": SERVICE_PROJECT,
                "user_domain_name": DOMAIN, "project_domain_name": DOMAIN,
                "service_token_roles_required": True}

    def client_auth(self, user: str) -> dict:
        """[placement], [neutron], [glance]-style keystoneauth options."""
        return {"auth_type": "password", "auth_url": self.url,
                "username": user, "password": self.password,
                "project_name": SERVICE_PROJECT,
                "user_domain_name": DOMAIN, "project_domain_name": DOMAIN,
                "region_name": REGION}

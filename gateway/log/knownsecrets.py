"""Every upstream key the gateway holds, as one matcher for the bodies it logs.

With ``GATEWAY_LOG_BODIES=1`` a client may paste one of the gateway's own
upstream keys into a prompt, or an upstream may echo it: the request log must
not keep it, whatever its shape. Decrypting every account's key per request is
out of the question, so the configuration cache (``gateway.state``) has this
object reload its :class:`~accounts.redact.SecretSet` each time it re-reads
(every ``GATEWAY_CONFIG_TTL`` seconds, in a worker thread): one query for the
encrypted keys; a key is decrypted only the first time it is seen, and the
matcher is rebuilt only when the set of keys changed (1,000 keys: a few ms). The
log writer reads :attr:`KnownSecrets.current` when it keeps a body.

Only built when body logging is on: otherwise no key is decrypted for it.
"""

from __future__ import annotations

import logging

from accounts.redact import SecretSet

log = logging.getLogger(__name__)


class KnownSecrets:
    def __init__(self) -> None:
        self._plain: dict[str, str] = {}  # encrypted key → plain key
        self.current = SecretSet(())

    def reload(self) -> SecretSet:
        """The matcher for the accounts' keys as they are now (database access: call it in a thread)."""

        from accounts import secrets
        from accounts.models import Account

        # Every account's, disabled ones too: a key out of rotation is still a key.
        tokens = set(Account.objects.values_list("secret_encrypted", flat=True))
        if tokens == self._plain.keys():
            return self.current
        plain: dict[str, str] = {}
        for token in tokens:
            known = self._plain.get(token)
            if known is None:
                try:
                    known = secrets.decrypt(token)
                except ValueError:
                    log.warning("an account's key cannot be decrypted with the configured key; "
                                "it cannot be removed from logged bodies")
                    continue
            plain[token] = known
        self._plain = plain
        self.current = SecretSet(plain.values())
        return self.current

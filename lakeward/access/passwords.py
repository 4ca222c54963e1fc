"""The account's password policy: what a user's console password must be.

It is IAM's default policy, which an AWS account has until it sets one of its own: at least
8 characters (at most 128), of at least three of the four kinds (upper-case letters,
lower-case letters, numbers, other characters), and not the user's own name. IAM checks it
where a password is set, so ``iam.create_user`` (the CLI's and the console's way to give a
user a password) checks it here; the seed's generated passwords are long and random.
"""

from __future__ import annotations

from lakeward.errors import InvalidRequest

MIN_LENGTH = 8
MAX_LENGTH = 128
KINDS = 3

POLICY = (
    f"at least {MIN_LENGTH} characters, of at least {KINDS} of the kinds upper-case letters, "
    "lower-case letters, numbers and other characters, and not the user's name"
)


def check_password(user: str, password: str) -> None:
    """Refuse, naming every rule it breaks, a password the policy does not allow."""
    broken = []
    if len(password) < MIN_LENGTH:
        broken.append(f"it has {len(password)} characters, fewer than {MIN_LENGTH}")
    if len(password) > MAX_LENGTH:
        broken.append(f"it has {len(password)} characters, more than {MAX_LENGTH}")
    kinds = sum(
        (
            any(c.isupper() for c in password),
            any(c.islower() for c in password),
            any(c.isdigit() for c in password),
            any(not c.isalnum() for c in password),
        )
    )
    if kinds < KINDS:
        broken.append(f"it has {kinds} of the four kinds of characters, not {KINDS}")
    if password.lower() == user.lower():
        broken.append("it is the user's name")
    if broken:
        raise InvalidRequest(
            f"PasswordPolicyViolation: the password of user {user} does not meet the "
            f"account's password policy ({POLICY}): {'; '.join(broken)}"
        )

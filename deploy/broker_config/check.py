"""Every rendered file read back as Mosquitto will read it and compared with the plan,
before anything is written."""

from __future__ import annotations

from deploy.broker_config.acl import read_acl, topic_filter_problem
from deploy.broker_config.bridge import bridge_conf_sections
from deploy.broker_config.model import BrokerConfigError, BrokerPlan, Grant
from deploy.broker_config.passwords import read_passwd
from deploy.broker_config.render import conf_sections, read_conf


def check_rendered(  # noqa: C901  reads back each rendered file, one check after another
    plan: BrokerPlan,
    conf: str,
    acl: str,
    passwd: str,
    bridge_password: str | None = None,
    bridge_conf: str = "",
    local_password: str | None = None,
) -> None:
    """Read each rendered file back as Mosquitto will and compare with the plan; raises
    ``BrokerConfigError`` if anything differs (a value that broke its line, a grant that is
    not one). Runs before anything is written."""
    problems: list[str] = []
    sections = conf_sections(plan, bridge_password)
    planned = [(d.key, d.value) for s in sections for d in s.directives]
    if read_conf(conf) != planned:
        problems.append("mosquitto.conf does not read back as planned")
    bridge_sections = bridge_conf_sections(plan, bridge_password, local_password)
    if read_conf(bridge_conf) != [(d.key, d.value) for s in bridge_sections for d in s.directives]:
        problems.append("bridge.conf does not read back as planned")
    try:
        grants = read_acl(acl)
    except ValueError as exc:
        problems.append(f"acl does not read back: {exc}")
    else:
        wanted: dict[str | None, list[Grant]] = {u.name: list(u.grants) for u in plan.users}
        if grants != wanted:
            problems.append("acl does not read back as planned")
        for user, user_grants in grants.items():
            for grant in user_grants:
                problem = topic_filter_problem(grant.topic)
                if problem:
                    problems.append(f"acl: {user}'s topic {grant.topic!r}: {problem}")
    if sorted(read_passwd(passwd)) != sorted(u.name for u in plan.users):
        problems.append("passwd does not read back as planned")
    for key, value in read_conf(conf) + read_conf(bridge_conf):
        if key == "topic":
            words = value.split(" ")
            if len(words) != 3 or words[1] not in ("in", "out") or words[2] != "1":
                problems.append(f"mosquitto.conf: bridge topic line {value!r} is not 'T in|out 1'")
            elif problem := topic_filter_problem(words[0]):
                problems.append(f"mosquitto.conf: bridge topic {words[0]!r}: {problem}")
    if problems:
        raise BrokerConfigError(problems)

"""The built-in environment ids: one row per id, with the import strings of its class and of its
task space, so that `import agentgym` registers them all without importing any environment's
code, and `get_task_space(id)` reads the space without building an env. A new family adds its rows
here (its code lives in envs/<family>/). OpenEnv-v0 declares no task space: its space is the
server's, known only once an env is made with base_url."""

TEXTWORLD_SPACE = "agentgym.envs.textworld.tasks:TextWorldTaskSpace.for_challenge"

BUILTIN_ENVS: list[dict] = [
    dict(
        id="Household-v0",
        entry_point="agentgym.envs.household.env:HouseholdEnv",
        task_space="agentgym.envs.household.env:HouseholdEnv.task_space",
        max_episode_steps=50,
        description="ALFWorld-like household tasks: find, clean/heat/cool, place objects",
    ),
    dict(
        id="ALFWorld-v0",
        entry_point="agentgym.envs.alfworld.env:ALFWorldEnv",
        task_space="agentgym.envs.alfworld.env:ALFWorldEnv.task_space",  # the generated games (no data_path)
        max_episode_steps=50,
        description="ALFWorld's real text engine (needs the `alfworld` extra): generated games, or data_path=... for the official ones",
    ),
    # TextWorld's own generators (needs the `textworld` extra); games generated on demand. The
    # space is made from the registered `challenge`, as the env makes its own.
    *(
        dict(id=f"TextWorld-{name}-v0", entry_point="agentgym.envs.textworld.env:TextWorldEnv",
             task_space=TEXTWORLD_SPACE, max_episode_steps=steps, description=f"TextWorld {challenge} games",
             challenge=challenge)
        for name, challenge, steps in (
            ("Simple", "tw-simple", 50),
            ("CoinCollector", "tw-coin_collector", 100),
            ("TreasureHunter", "tw-treasure_hunter", 50),
            ("Cooking", "tw-cooking", 50),
            ("Custom", "custom", 50),
        )
    ),
    dict(id="TextWorld-v0", entry_point="agentgym.envs.textworld.env:TextWorldEnv", task_space=TEXTWORLD_SPACE,
         max_episode_steps=100, description="a TextWorld game file (game_file=...); without one, a small two-room game", challenge="file"),
    dict(
        id="WebShop-v0",
        entry_point="agentgym.envs.webshop.env:WebShopEnv",
        task_space="agentgym.envs.webshop.env:WebShopEnv.task_space",
        max_episode_steps=15,
        description="WebShop-like shopping: search a generated catalog, pick options, buy (text backend)",
    ),
    dict(
        id="WebShop-Browser-v0",
        entry_point="agentgym.envs.webshop.env:WebShopEnv",
        task_space="agentgym.envs.webshop.env:WebShopEnv.task_space",
        max_episode_steps=15,
        backend="browser",
        description="The same web shop served over HTTP and driven by headless Chromium (Playwright)",
    ),
    dict(
        id="ToolUse-v0",
        entry_point="agentgym.envs.tools.env:ToolUseEnv",
        task_space="agentgym.envs.tools.env:ToolUseEnv.task_space",
        max_episode_steps=20,
        description="JSON tool calls over stateful apps (contacts, calendar, email, files, bank, shopping); state-graded",
    ),
    dict(
        id="Briefing-v0",
        entry_point="agentgym.envs.briefing.env:BriefingEnv",
        task_space="agentgym.envs.briefing.env:BriefingEnv.task_space",
        max_episode_steps=12,
        description="Written reports over the tool-use apps (meeting brief, agenda, spending summary); rubric-graded",
    ),
    dict(
        id="SearchQA-v0",
        entry_point="agentgym.envs.search.env:SearchQAEnv",
        task_space="agentgym.envs.search.env:SearchQAEnv.task_space",
        max_episode_steps=12,
        description="Multi-hop QA over a generated encyclopedia (>= 20k docs): search[...], open[...], answer[...]",
    ),
    dict(
        id="SWE-v0",
        entry_point="agentgym.envs.swe.env:SWEEnv",
        task_space="agentgym.envs.swe.env:SWEEnv.task_space",
        max_episode_steps=30,
        description="Fix injected bugs in small Python projects with bash/view/str_replace/create/run_tests/submit in a bwrap sandbox; hidden tests grade",
    ),
    dict(
        id="OpenEnv-v0",
        entry_point="agentgym.integrations.openenv_client:OpenEnvTextEnv",
        max_episode_steps=None,
        description="Any running OpenEnv server as a TextEnv (pass base_url=...; needs the `openenv` extra)",
    ),
]

#!/usr/bin/python3
"""Synthetic agent (tool-calling) conversations for the tiny Hy3 model.

Used by tools/make/train_tiny_hy3.py (--tool-frac) for training and by tools/make/eval_tool_calls.py for the
held-out evaluation. Each sample is a dict {"tools": [OpenAI tool objects], "messages": [...], "calls": [...]}
in the shape the Hy3 chat template (tencent-Hy3.jinja; specs/hy3_tool_calls.md §1) expects: tools as
{"type": "function", "function": {"name", "description", "parameters": JSON schema}}, assistant tool_calls
with `arguments` as a mapping, tool responses as role "tool" messages bound to the calls by order, and a final
assistant answer that repeats the values of the responses.

Tools (7): get_weather(city: string, unit: string enum), get_time(timezone: string), add(a: integer,
b: integer), get_population(country: string), set_alarm(hour: integer, enabled: boolean),
sum_list(numbers: array of integers), get_date() (no arguments).

split "train" draws entities (cities, countries, time zones) and user phrasings from the training lists;
split "heldout" draws them only from disjoint held-out lists (new cities, countries, time zones and new
phrasings), so the evaluation measures generalisation, not memorised prompts. Numbers are random in both.

make_echo() is a plain (no tools) "repeat this word" chat over ALL entities, held-out ones included. It stands in
for the pretraining a real model has: the tiny model's embeddings of tokens that never occur in its training
data are all the same untrained vector, and " Kyoto" (prompt, after a space) and "Kyoto" (argument value, no
space) are different tokens, so without it no held-out name could be copied at all. Held-out entities still
never occur in a tool prompt, a tool call or a tool response during training.
"""
import json

TOOLS = {
    "get_weather": {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"]}}},
    "get_time": {"type": "function", "function": {
        "name": "get_time", "description": "Get the local time in a time zone.",
        "parameters": {"type": "object", "properties": {
            "timezone": {"type": "string", "description": "IANA time zone"}},
            "required": ["timezone"]}}},
    "add": {"type": "function", "function": {
        "name": "add", "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]}}},
    "get_population": {"type": "function", "function": {
        "name": "get_population", "description": "Look up the population of a country.",
        "parameters": {"type": "object", "properties": {
            "country": {"type": "string"}},
            "required": ["country"]}}},
    "set_alarm": {"type": "function", "function": {
        "name": "set_alarm", "description": "Set or clear the alarm.",
        "parameters": {"type": "object", "properties": {
            "hour": {"type": "integer"}, "enabled": {"type": "boolean"}},
            "required": ["hour", "enabled"]}}},
    "sum_list": {"type": "function", "function": {
        "name": "sum_list", "description": "Sum a list of integers.",
        "parameters": {"type": "object", "properties": {
            "numbers": {"type": "array", "items": {"type": "integer"}}},
            "required": ["numbers"]}}},
    "get_date": {"type": "function", "function": {
        "name": "get_date", "description": "Get today's date.",
        "parameters": {"type": "object", "properties": {}}}},
}
TOOL_NAMES = list(TOOLS)

CITIES = {
    "train": ["Paris", "London", "Rome", "Berlin", "Madrid", "Tokyo", "Lisbon", "Vienna", "Dublin", "Oslo",
              "Prague", "Athens", "Cairo", "Moscow", "Sydney", "Toronto", "Chicago", "Boston", "Seattle", "Denver",
              "Miami", "Dallas", "Houston", "Beijing", "Shanghai", "Seoul", "Delhi", "Mumbai", "Lima", "Bogota",
              "Nairobi", "Lagos", "Warsaw", "Budapest", "Helsinki", "Stockholm", "Zurich", "Geneva", "Milan",
              "Naples", "Venice", "Florence", "Munich", "Hamburg", "Brussels", "Amsterdam", "Copenhagen", "Manila",
              "Bangkok", "Hanoi", "Jakarta", "Singapore", "Istanbul", "Tehran", "Baghdad", "Havana", "Quito",
              "Santiago", "Montreal", "Vancouver", "Phoenix", "Atlanta", "Detroit", "Portland", "Austin"],
    "heldout": ["Verona", "Glasgow", "Kyoto", "Porto", "Krakow", "Bristol", "Osaka", "Seville", "Lyon",
                "Calgary", "Perth", "Dubai", "Riga", "Tunis", "Marseille"],
}
COUNTRIES = {
    "train": ["France", "Germany", "Italy", "Spain", "Japan", "China", "India", "Brazil", "Canada", "Mexico",
              "Egypt", "Kenya", "Nigeria", "Russia", "Poland", "Sweden", "Norway", "Finland", "Greece", "Turkey",
              "Iran", "Iraq", "Chile", "Peru", "Cuba", "Austria", "Belgium", "Ireland", "Portugal", "Denmark",
              "Australia", "Argentina", "Colombia", "Vietnam", "Thailand", "Indonesia", "Korea", "Ukraine",
              "Hungary", "Romania"],
    "heldout": ["Morocco", "Switzerland", "Netherlands", "Ghana", "Pakistan", "Scotland", "Iceland", "Bolivia",
                "Ecuador", "Nepal"],
}
TIMEZONES = {
    "train": ["Europe/Paris", "Europe/London", "Europe/Berlin", "Europe/Madrid", "Europe/Rome", "Asia/Tokyo",
              "Asia/Shanghai", "Asia/Seoul", "Asia/Kolkata", "America/New_York", "America/Chicago",
              "America/Denver", "America/Los_Angeles", "America/Toronto", "Australia/Sydney", "Africa/Cairo",
              "Africa/Nairobi", "Europe/Moscow", "Europe/Oslo", "Europe/Vienna", "Asia/Bangkok", "UTC"],
    "heldout": ["Europe/Lisbon", "Asia/Singapore", "America/Mexico_City", "Europe/Athens", "Asia/Dubai",
                "America/Lima"],
}
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear"]

# user phrasings per request kind: {x} = entity; the last entries are held out
PHRASES = {
    "weather": {
        "train": ["What is the weather in {city}?", "How is the weather in {city} today?",
                  "Tell me the weather for {city}.", "Weather in {city}, please.",
                  "Is it sunny in {city}?", "What's it like outside in {city} right now?",
                  "Can you check the weather in {city}?", "I am going to {city}. What is the weather there?"],
        "heldout": ["Could you look up the current weather in {city}?", "Give me the forecast for {city}."],
    },
    "weather_unit": {
        "train": ["What is the weather in {city} in {unit}?", "Tell me the temperature in {city} in {unit}.",
                  "How warm is it in {city}? Use {unit}.", "Weather for {city} in {unit}, please.",
                  "Check the weather in {city}, in degrees {unit}."],
        "heldout": ["In {unit}, what is the weather like in {city}?"],
    },
    "time": {
        "train": ["What time is it in {tz}?", "Tell me the current time in {tz}.", "What is the time in {tz}?",
                  "Can you get the local time for {tz}?", "Time in {tz}, please.",
                  "I need the current time for the {tz} time zone."],
        "heldout": ["Do you know what time it is in {tz} right now?"],
    },
    "add": {
        "train": ["What is {a} plus {b}?", "Add {a} and {b}.", "Please compute {a} + {b}.",
                  "What do you get if you add {a} to {b}?", "Sum {a} and {b} for me.", "{a} + {b} = ?",
                  "Calculate {a} plus {b}."],
        "heldout": ["How much is {a} added to {b}?", "Work out the sum of {a} and {b}."],
    },
    "population": {
        "train": ["What is the population of {country}?", "How many people live in {country}?",
                  "Look up the population of {country}.", "Population of {country}?",
                  "How big is the population of {country}?", "Tell me how many people are in {country}."],
        "heldout": ["Find out how many inhabitants {country} has.", "Can you check the population of {country}?"],
    },
    "alarm_on": {
        "train": ["Set an alarm for {hour} o'clock.", "Wake me up at {hour}.", "Please set the alarm to {hour}.",
                  "I need an alarm at {hour} o'clock.", "Turn on the alarm for {hour}."],
        "heldout": ["Can you make the alarm ring at {hour} o'clock?"],
    },
    "alarm_off": {
        "train": ["Turn off the {hour} o'clock alarm.", "Disable the alarm at {hour}.",
                  "Cancel my alarm for {hour}.", "Switch off the alarm set for {hour} o'clock."],
        "heldout": ["I don't need the {hour} o'clock alarm any more, clear it."],
    },
    "sum_list": {
        "train": ["What is the sum of {nums}?", "Add up these numbers: {nums}.", "Sum the list {nums}.",
                  "Please total {nums}.", "What do {nums} add up to?"],
        "heldout": ["Compute the total of the numbers {nums}."],
    },
    "date": {
        "train": ["What is the date today?", "What day is it today?", "Tell me today's date.",
                  "What's the date?", "Which date is it?"],
        "heldout": ["Could you tell me what the date is today?"],
    },
}
# joiners for two requests in one user message (parallel calls)
JOIN = {"train": ["{x} Also, {y}", "{x} And {y}", "Two things. {x} {y}", "{x} Then {y}"],
        "heldout": ["First: {x} Second: {y}"]}


def _lc(s):
    return s[0].lower() + s[1:] if s and not s.startswith(("I ", "I'")) else s


def _num_list(rng):
    k = int(rng.integers(2, 5))
    return [int(x) for x in rng.integers(1, 50, size=k)]


def _fmt_list(nums, rng):
    if rng.random() < 0.5:
        return ", ".join(str(n) for n in nums[:-1]) + " and " + str(nums[-1])
    return "[" + ", ".join(str(n) for n in nums) + "]"


def _pick(rng, xs):
    return xs[int(rng.integers(len(xs)))]


def make_request(rng, split, kind=None):
    """One user request -> (text, tool name, arguments dict, tool response dict, answer sentence)."""
    kinds = ["weather", "weather", "time", "add", "population", "alarm", "sum_list", "date"]
    kind = kind or _pick(rng, kinds)
    if kind == "weather":
        city = _pick(rng, CITIES[split])
        if rng.random() < 0.5:
            unit = _pick(rng, ["celsius", "fahrenheit"])
            text = _pick(rng, PHRASES["weather_unit"][split]).format(
                city=city, unit=unit if rng.random() < 0.7 else unit.capitalize())
        else:
            unit = "celsius"
            text = _pick(rng, PHRASES["weather"][split]).format(city=city)
        temp = int(rng.integers(-5, 36)) if unit == "celsius" else int(rng.integers(25, 98))
        cond = _pick(rng, CONDITIONS)
        resp = {"city": city, "temperature": temp, "unit": unit, "condition": cond}
        ans = "The weather in %s is %d degrees %s and %s." % (city, temp, unit, cond)
        return text, "get_weather", {"city": city, "unit": unit}, resp, ans
    if kind == "time":
        tz = _pick(rng, TIMEZONES[split])
        t = "%02d:%02d" % (int(rng.integers(0, 24)), int(rng.integers(0, 60)))
        text = _pick(rng, PHRASES["time"][split]).format(tz=tz)
        return text, "get_time", {"timezone": tz}, {"timezone": tz, "time": t}, "It is %s in %s." % (t, tz)
    if kind == "add":
        a, b = int(rng.integers(0, 1000)), int(rng.integers(0, 1000))
        text = _pick(rng, PHRASES["add"][split]).format(a=a, b=b)
        return text, "add", {"a": a, "b": b}, {"result": a + b}, "%d plus %d is %d." % (a, b, a + b)
    if kind == "population":
        c = _pick(rng, COUNTRIES[split])
        p = int(rng.integers(1, 1500)) * 100000
        text = _pick(rng, PHRASES["population"][split]).format(country=c)
        return text, "get_population", {"country": c}, {"country": c, "population": p}, \
            "The population of %s is %d." % (c, p)
    if kind == "alarm":
        hour = int(rng.integers(0, 24))
        on = bool(rng.random() < 0.6)
        text = _pick(rng, PHRASES["alarm_on" if on else "alarm_off"][split]).format(hour=hour)
        ans = ("The alarm is set for %d o'clock." % hour) if on else ("The %d o'clock alarm is off." % hour)
        return text, "set_alarm", {"hour": hour, "enabled": on}, {"status": "ok", "hour": hour, "enabled": on}, ans
    if kind == "sum_list":
        nums = _num_list(rng)
        text = _pick(rng, PHRASES["sum_list"][split]).format(nums=_fmt_list(nums, rng))
        return text, "sum_list", {"numbers": nums}, {"result": sum(nums)}, "The total is %d." % sum(nums)
    if kind == "date":
        d = "2025-%02d-%02d" % (int(rng.integers(1, 13)), int(rng.integers(1, 29)))
        text = _pick(rng, PHRASES["date"][split])
        return text, "get_date", {}, {"date": d}, "Today is %s." % d
    raise ValueError(kind)


def make_sample(rng, split="train", parallel=None, max_tools=3):
    """A full agent conversation: user -> assistant tool_calls (1 or 2) -> tool responses -> final answer."""
    if parallel is None:
        parallel = rng.random() < 0.3
    reqs = [make_request(rng, split)]
    if parallel:
        while True:
            r = make_request(rng, split)
            if r[1] == "get_date" and reqs[0][1] == "get_date":
                continue
            if r[0] != reqs[0][0]:
                break
        reqs.append(r)
        text = _pick(rng, JOIN[split]).format(x=reqs[0][0], y=_lc(reqs[1][0]))
    else:
        text = reqs[0][0]
    need = []
    for r in reqs:
        if r[1] not in need:
            need.append(r[1])
    n_tools = max(len(need), int(rng.integers(1, max_tools + 1)))
    others = [t for t in TOOL_NAMES if t not in need]
    rng.shuffle(others)
    names = need + others[:n_tools - len(need)]
    rng.shuffle(names)
    tools = [TOOLS[n] for n in names]
    calls = [{"name": r[1], "arguments": r[2]} for r in reqs]
    messages = [{"role": "user", "content": text},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                                for c in calls]}]
    for r in reqs:
        messages.append({"role": "tool", "content": json.dumps(r[3], ensure_ascii=False)})
    messages.append({"role": "assistant", "content": " ".join(r[4] for r in reqs)})
    return {"tools": tools, "messages": messages, "calls": calls,
            "responses": [r[3] for r in reqs], "answer": messages[-1]["content"]}


ECHO = {"in": ["Repeat after me: {e}", "Say {e}.", "Please write {e}.", "Echo the word {e}.", "Type {e} back to me."],
        "out": ["{e}: use it in a sentence.", "{e}. Say it back.", "{e}?"]}


def make_echo(rng, list_frac=0.0, list_max=4):
    """A plain chat that copies one entity (any split) or number: space-prefixed in the prompt -> bare in the
    answer, or bare at the start of the prompt -> space-prefixed in the answer; a fraction list_frac copies a
    list of 2-list_max such items."""
    def item():
        if list_frac and rng.random() < 0.25:          # (list_frac 0 keeps the first run's random stream)
            return str(int(rng.integers(0, 1000)))
        pool = _pick(rng, [CITIES, COUNTRIES, TIMEZONES])
        return _pick(rng, pool["train"] + pool["heldout"] * 2)

    e = item()
    if list_frac and rng.random() < list_frac:          # copy drill: 2-list_max items, names and numbers
        xs = [item() for _ in range(int(rng.integers(2, list_max + 1)))]
        e = ", ".join(xs[:-1]) + " and " + xs[-1]
    if rng.random() < 0.6:
        return {"tools": None, "messages": [{"role": "user", "content": _pick(rng, ECHO["in"]).format(e=e)},
                                            {"role": "assistant", "content": e}]}
    return {"tools": None, "messages": [{"role": "user", "content": _pick(rng, ECHO["out"]).format(e=e)},
                                        {"role": "assistant", "content": "You said %s." % e}]}

"""Replies in another language: what a Spanish, Portuguese, French, German, Italian or Dutch
clause asks to keep.

The rules of ``clawd.signals.memory`` and its classifier read English: on "Jajaja qué random,
me encantó." the classifier guessed standing (0.62) and the English rewriting turned "me" into
"the user"; "Ab jetzt bitte auf Deutsch." made nothing. So a clause mostly in one of these
languages (``foreign``) is read here instead, by its own small rules and never by the
classifier: a name said outright ("me llamo Lucía", "não sou Mari, sou Marisol"), a language
asked for ("en español", "auf Deutsch": "Answer in Spanish."), and anything else only with a
marker that it lasts ("de ahora en adelante", "sempre", "désormais", "ab jetzt", "d'ora in
poi", or an English one: "respóndeme en francés from now on"). A length with a number becomes
an English memory that decoding keeps ("máximo cuatro líneas": "Keep answers to at most 4
lines."); any other clause is kept as said, since the served model reads it in the system
message. A clause that corrects this answer only ("a este", "esta vez", "diesmal") makes none.

Run alone to see what a reply would make::

    python -m clawd.signals.foreign "Ok pero resumido: 80 palabras máximo de ahora en adelante."
"""

from __future__ import annotations

import re
import sys

from clawd.signals.phrasing import STRONG

# Function words of the languages read here, none of them an English word (not "as", "os",
# "um", "per", "plus", "todo": a clause in English must not count as theirs).
_THEIRS = frozenset(
    "de que el la los las en por para con mi tu te es y un una se lo del al pero más muy "
    "porque como cuando eso esto está estoy soy todas todos tus mis siempre nunca gracias "
    "también sí qué ahora meu minha você é não mais muito isso isto estou sou sempre obrigado "
    "obrigada agora le les des pour avec mes et une ne pas très parce comme quand ça cela est "
    "suis tout toujours jamais merci aussi oui maintenant vous je der das und ich nicht bitte "
    "mit für ist ein eine mein meine du dich dir auch sehr wenn ja immer nie jetzt sie zu auf "
    "di che il gli è ti mio mia questo sono mai grazie anche ora het een niet ik je wat voor "
    "maar ook graag altijd nooit este esta estos unas unos quiero voy vez ni nada sólo porfa "
    "pues bueno entonces mucho hola ay jaja jajaja jajajaja pra né tá tô vc kkk obg moi toi "
    "c'est n'est doch mir mich uns aber oder nie jest się że ale mnie proszę dzięki zawsze "
    "nigdy teraz jestem czy tak już bardzo tylko dla mam mój moje moja twoje jak być może "
    "będzie odpowiadaj pisz".split()
)
# German "nie" is "never", Polish "nie" is "not": "nie" lasts only among German words
_GERMAN = frozenset(
    "ich nicht bitte und der die das mir mich immer doch auch ist mit für sie ein eine mein "
    "meine du dich dir wieder mehr mal keine kein wir uns".split()
)
_OURS = frozenset(
    "the and you your is it to of for that this with i my be are not please can just but what "
    "have do it's i'm don't thanks from now answers keep like was will would if or at on an all "
    "they we u ur pls lol answer reply always never".split()
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


LASTING = re.compile(
    r"\b(?:de ahora en adelante|a partir de ahora|de aqu[ií] en adelante|desde ahora|en adelante"
    r"|siempre|nunca|ya no|en (?:todas|cada una de) (?:tus|las|mis) \w+|cada vez|acu[eé]rdate"
    r"|recu[eé]rda(?:lo)?|(?:por|en cada|pro|par|per|per ogni) (?:respuesta|resposta|r[ée]ponse"
    r"|antwort|risposta|mensaje|mensagem|message)|ten en cuenta|por defecto|a partir de agora"
    r"|daqui (?:pra|para) (?:a )?frente"
    r"|de agora em diante|sempre|nunca mais|em todas as (?:suas )?\w+|toda vez|lembr[ae]"
    r"|leve em conta|[àa] partir de maintenant|dor[ée]navant|d[ée]sormais|toujours|jamais"
    r"|[àa] l'avenir|souviens-toi|rappelle-toi|retiens|chaque fois|dans (?:toutes )?tes \w+"
    r"|ab jetzt|ab sofort|von jetzt an|in zukunft|k[üu]nftig|zuk[üu]nftig|immer|niemals|nie"
    r"|merk dir|jedes mal|in (?:allen|deinen) \w+|d'ora in poi|da ora in poi|da adesso|mai pi[uù]"
    r"|in futuro|ricorda(?:ti)?|ogni volta|in tutte le (?:tue )?\w+|vanaf nu|voortaan|altijd"
    r"|nooit|onthoud|od teraz|od dzi[sś]|od dzisiaj|zawsze|nigdy|na sta[lł]e|zapami[eę]taj"
    r"|pami[eę]taj|za ka[zż]dym razem|w ka[zż]dej odpowiedzi|na przysz[lł]o[sś][cć]"
    r"|never|(?<!weeks )(?<!days )(?<!months )(?<!years )(?<!hours )from now"
    r")\b",  # English markers: phrasing.STRONG ("never" is none there)
    re.I,
)
ONE_OFF = re.compile(
    r"\b(?:a este|a esta|en este|esta vez|s[oó]lo (?:esta|este)|desta vez|dessa vez|nesse|neste"
    r"|cette fois|pour celui-ci|diesmal|dieses mal|nur hier|questa volta|solo questo|deze keer)\b",
    re.I,
)
_LANGUAGES = {
    "español": "Spanish", "castellano": "Spanish", "espanhol": "Spanish", "espagnol": "Spanish",
    "spanisch": "Spanish", "spagnolo": "Spanish", "inglés": "English", "inglês": "English",
    "anglais": "English", "englisch": "English", "inglese": "English", "engels": "English",
    "francés": "French", "francês": "French", "français": "French", "französisch": "French",
    "francese": "French", "frans": "French", "alemán": "German", "alemão": "German",
    "allemand": "German", "deutsch": "German", "tedesco": "German", "duits": "German",
    "portugués": "Portuguese", "português": "Portuguese", "portugais": "Portuguese",
    "portugiesisch": "Portuguese", "portoghese": "Portuguese", "italiano": "Italian",
    "italien": "Italian", "italienisch": "Italian", "nederlands": "Dutch",
    "niederländisch": "Dutch", "japonés": "Japanese", "japonês": "Japanese", "catalán": "Catalan",
}  # fmt: skip
# "po polsku", "по-русски", "türkçe", "på svenska": a language said as an adverb
_ADVERBS = {
    "po polsku": "Polish", "po angielsku": "English", "po niemiecku": "German",
    "po hiszpańsku": "Spanish", "po francusku": "French", "по-русски": "Russian",
    "по-английски": "English", "українською": "Ukrainian", "türkçe": "Turkish",
    "på svenska": "Swedish", "på norsk": "Norwegian", "på dansk": "Danish",
    "suomeksi": "Finnish", "magyarul": "Hungarian", "česky": "Czech", "po česky": "Czech",
    "în română": "Romanian", "hindi mein": "Hindi", "hindi me": "Hindi",
    "bahasa indonesia": "Indonesian", "tiếng việt": "Vietnamese", "sa tagalog": "Tagalog",
    "kwa kiswahili": "Swahili",
}  # fmt: skip
_LANGUAGES |= _ADVERBS
_IN_LANGUAGE = re.compile(
    r"\b(?:en|em|auf|in|in het)\s+("
    + "|".join(k for k in _LANGUAGES if k not in _ADVERBS)
    + r")\b|(?<!\w)("
    + "|".join(_ADVERBS)
    + r")(?!\w)",
    re.I,
)
_NAME = r"([A-ZÁÉÍÓÚÑÇÀÂÊÔÃÕÜÖÄ][\wáéíóúñçàâêôãõüöä'-]{1,30})"
_NAMES = re.compile(
    r"\b(?i:me llamo|ll[aá]mame|mi nombre es|me chamo|meu nome [ée]|(?:pode )?me cham[ae] de"
    r"|je m'appelle|appelle[sz]?-moi|mon nom est|ich hei(?:ß|ss)e|nenn(?:en sie)? mich"
    r"|mein name ist|mi chiamo|chiamami|il mio nome [èe]|noem me|ik heet|mijn naam is"
    r"|m[oó]w mi|nazywam si[eę]|mam na imi[eę])\s+"
    + _NAME
    + r"|\b(?i:no soy|n[ãa]o sou|je ne suis pas|ich bin nicht|non sono)\s+\w+\s*,?\s*"
    r"(?i:(?:pero |mas |sino )?(?:soy|es|sou|[ée]|c'est|je suis|ich bin|sono))\s+" + _NAME,
)
_NUMBERS = {
    "un": 1, "una": 1, "uno": 1, "um": 1, "uma": 1, "une": 1, "ein": 1, "eine": 1, "einen": 1,
    "dos": 2, "dois": 2, "duas": 2, "deux": 2, "zwei": 2, "due": 2, "tres": 3, "três": 3,
    "trois": 3, "drei": 3, "tre": 3, "cuatro": 4, "quatro": 4, "quatre": 4, "vier": 4,
    "quattro": 4, "cinco": 5, "cinq": 5, "fünf": 5, "cinque": 5,
    "jedno": 1, "jeden": 1, "jedna": 1, "dwa": 2, "dwie": 2, "trzy": 3, "cztery": 4, "pięć": 5,
}  # fmt: skip
_UNITS = (
    ("words", r"palabras|palavras|mots|w[öo]rter|worte|parole|woorden|s[lł][oó]w|s[lł]owa"),
    (
        "sentences",
        r"frases?|oraciones|oraci[oó]n|phrases?|s[äa]tze|satz|frasi|zinnen|zda[nń]|zdania|zdanie",
    ),
    (
        "lines",
        r"l[ií]neas?|linhas?|lignes?|zeilen?|righe|riga|regels?|linijk[ia]|linijek|linie|linii",
    ),
    (
        "paragraphs",
        r"p[aá]rrafos?|par[aá]grafos?|paragraphes?|abs[äa]tze?|paragrafi|paragrafo|akapit[yów]*",
    ),
)
_LENGTH = re.compile(
    r"\b(\d+|"
    + "|".join(_NUMBERS)
    + r")\s+(?:solos?\s+|sola\s+)?("
    + "|".join(u for _, u in _UNITS)
    + r")\b",
    re.I,
)
_SHORT = re.compile(
    r"\b(?:cort[ao]s|cortitas?|breves?|resumid[ao]s?|curt[ao]s|courtes?|kurz|kürzer|brevi|kort"
    r"|korter|kr[oó]tko|kr[oó]cej|kr[oó]tkie|zwi[eę][zź]le)\b",
    re.I,
)
_FORMAT = re.compile(
    r"\b(?:emojis?|listas?|listes?|vi[ñn]etas|negritas|markdown|t[ií]tulos)\b", re.I
)


def foreign(clause: str, theirs_around: bool = False) -> bool:
    """Whether ``clause`` is read here: mostly in one of these languages (two of their
    function words at least, and no fewer than English's), or asking in their words for a
    name, a language or a length ("Me llamo Lucía, gracias.", "respóndeme en francés from now
    on", "maks 3 zdania"); ``theirs_around``: the reply as a whole is in their language."""
    words = _WORD.findall(clause.lower())
    theirs = sum(w in _THEIRS for w in words)
    ours = sum(w in _OURS for w in words)
    # "Korter graag." in a Dutch reply: one of their words is enough where the reply is theirs
    mostly = (theirs >= 2 or (theirs_around and theirs)) and theirs >= ours
    length = _LENGTH.search(clause)
    length = length and length.group(2).lower() not in ("phrase", "phrases")  # English too
    return mostly or bool(_NAMES.search(clause) or _IN_LANGUAGE.search(clause) or length)


def lasts(clause: str) -> bool:
    """Whether ``clause`` says that what it asks lasts, in these languages or in English
    ("respóndeme en francés from now on")."""
    said = {m.group(0).lower() for m in LASTING.finditer(clause)}
    if said == {"nie"} and not _GERMAN & set(_WORD.findall(clause.lower())):
        return bool(STRONG.search(clause))
    return bool(said or STRONG.search(clause))


def _length(clause: str) -> str | None:
    m = _LENGTH.search(clause)
    if m:
        n = int(m.group(1)) if m.group(1).isdigit() else _NUMBERS[m.group(1).lower()]
        unit = next(name for name, pattern in _UNITS if re.fullmatch(pattern, m.group(2), re.I))
        return f"Keep answers to at most {n} {unit if n > 1 else unit[:-1]}."
    return "Keep answers short." if _SHORT.search(clause) else None


def read(clause: str, lasting: bool) -> tuple[str, str] | None:
    """What a foreign ``clause`` asks to keep, as (kind, memory text), or None; ``lasting``:
    a marker elsewhere in the reply says that it lasts."""
    m = _NAMES.search(clause)
    if m:
        return "name", f"Address the user as {next(g for g in m.groups() if g)}."
    marked = lasts(clause)
    if not (marked or lasting) or (ONE_OFF.search(clause) and not marked):
        return None
    m = _IN_LANGUAGE.search(clause)
    if m:
        said = m.group(1) or m.group(2)
        english = _LANGUAGES[said.lower()]
        return "language", f"Answer in {english} ({said.lower()})."
    length = _length(clause)
    if length:
        return "length", length
    text = re.sub(r"\s+", " ", clause).strip(" \t\"'`*_-,;:.!?")
    if not _WORD.search(LASTING.sub("", STRONG.sub("", text))):
        return None  # "Altijd.": a marker alone, about the sentence before it
    return ("format" if _FORMAT.search(text) else "other"), text[:1].upper() + text[1:] + "."


if __name__ == "__main__":
    said = " ".join(sys.argv[1:]) or sys.stdin.read()
    print("foreign" if foreign(said) else "english", read(said, False))

"""Facts that change, and facts said again in other words: a corpus of
two-statement cases in English, Chinese and both mixed.

Each case is what a person said twice, some time apart, and the fact an
extraction model would write for each statement. ``update``: the second
statement gives the fact a new value (moved, new job, pet renamed, a year
older, changed their mind, cancelled a plan) and must end current with the
first superseded. ``paraphrase``: it says the same again and must merge into
one memory. ``key2`` differs from ``key1`` where models drift between keys
for the same thing. Replayed by bench/updates.py; tests/test_updates.py holds the
engine to it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    kind: str  # update | paraphrase
    type: str
    said1: str
    fact1: str
    key1: str
    said2: str
    fact2: str
    key2: str


def _c(id: str, kind: str, type: str, said1: str, fact1: str, key1: str, said2: str, fact2: str,
       key2: str | None = None) -> Case:
    return Case(id, kind, type, said1, fact1, key1, said2, fact2, key2 or key1)


CASES: list[Case] = [
    # -- moved city -------------------------------------------------------------------------------
    _c("en-city-u1", "update", "profile", "I live in Shanghai.", "Alice lives in Shanghai", "alice_home_city",
       "I moved to Berlin last month.", "Alice lives in Berlin", "alice_home_city"),
    _c("en-city-u2", "update", "profile", "My home is in Leeds.", "Alice's home is in Leeds", "alice_home_city",
       "We relocated to Dublin, so that's home now.", "Alice now lives in Dublin", "alice_city"),
    _c("en-city-p1", "paraphrase", "profile", "I live in Paris.", "Alice lives in Paris", "alice_home_city",
       "Paris is where I call home.", "Alice's home is in Paris", "alice_home_city"),
    _c("en-city-p2", "paraphrase", "profile", "I'm based in Toronto.", "Alice is based in Toronto",
       "alice_home_city", "Still living in Toronto, yes.", "Alice lives in Toronto", "alice_city"),
    _c("zh-city-u1", "update", "profile", "我住在上海。", "小明住在上海", "xiaoming_home_city",
       "我上个月搬到北京了。", "小明住在北京", "xiaoming_home_city"),
    _c("zh-city-u2", "update", "profile", "我家在成都。", "小明的家在成都", "xiaoming_home_city",
       "我们已经搬去深圳定居了。", "小明现在定居深圳", "xiaoming_city"),
    _c("zh-city-p1", "paraphrase", "profile", "我住在杭州。", "小明住在杭州", "xiaoming_home_city",
       "杭州就是我的家。", "小明的家在杭州", "xiaoming_home_city"),
    _c("zh-city-p2", "paraphrase", "profile", "我现在在广州生活。", "小明在广州生活", "xiaoming_home_city",
       "对，我还住在广州。", "小明住在广州", "xiaoming_city"),
    _c("mx-city-u1", "update", "profile", "我叫小明，住在上海。", "小明住在上海", "xiaoming_home_city",
       "I live in Berlin now.", "Xiaoming lives in Berlin", "xiaoming_home_city"),
    _c("mx-city-u2", "update", "profile", "I live in Paris.", "Alice lives in Paris", "alice_home_city",
       "我已经搬到东京了。", "Alice搬到了东京", "alice_home_city"),
    _c("mx-city-p1", "paraphrase", "profile", "我住在上海。", "小明住在上海", "xiaoming_home_city",
       "Yes, I live in Shanghai.", "Xiaoming lives in Shanghai", "xiaoming_home_city"),
    _c("mx-city-p2", "paraphrase", "profile", "I live in Tokyo.", "Alice lives in Tokyo", "alice_home_city",
       "我住在东京。", "Alice住在东京", "alice_city"),
    # -- new job ------------------------------------------------------------------------------------
    _c("en-job-u1", "update", "profile", "I work as a nurse at St Mary's.", "Alice works as a nurse at St Mary's",
       "alice_job", "I quit nursing and now I'm a data analyst.", "Alice works as a data analyst", "alice_job"),
    _c("en-job-u2", "update", "profile", "I'm a teacher.", "Alice is a teacher", "alice_occupation",
       "Started my new job as a pilot this week!", "Alice works as a pilot", "alice_job"),
    _c("en-job-p1", "paraphrase", "profile", "I work as a software engineer.", "Alice is a software engineer",
       "alice_job", "I write software for a living.", "Alice works as a software engineer", "alice_job"),
    _c("en-job-p2", "paraphrase", "profile", "I'm a chef at a hotel.", "Alice is a chef at a hotel", "alice_job",
       "Cooking at the hotel keeps me busy, being the chef.", "Alice works as a hotel chef", "alice_occupation"),
    _c("zh-job-u1", "update", "profile", "我是一名护士。", "小明是一名护士", "xiaoming_job",
       "我换工作了，现在做程序员。", "小明现在是程序员", "xiaoming_job"),
    _c("zh-job-u2", "update", "profile", "我在银行上班。", "小明在银行上班", "xiaoming_job",
       "我从银行辞职了，开了一家咖啡店。", "小明开了一家咖啡店", "xiaoming_occupation"),
    _c("zh-job-p1", "paraphrase", "profile", "我是老师。", "小明是老师", "xiaoming_job",
       "我的工作是教书。", "小明的工作是当老师", "xiaoming_job"),
    _c("zh-job-p2", "paraphrase", "profile", "我在医院当医生。", "小明是医院的医生", "xiaoming_job",
       "我还是在医院做医生。", "小明在医院做医生", "xiaoming_occupation"),
    _c("mx-job-u1", "update", "profile", "我是记者。", "小明是记者", "xiaoming_job",
       "I became a lawyer last year.", "Xiaoming is a lawyer", "xiaoming_job"),
    _c("mx-job-u2", "update", "profile", "I work at Google.", "Alice works at Google", "alice_employer",
       "我现在在腾讯工作。", "Alice在腾讯工作", "alice_employer"),
    _c("mx-job-p1", "paraphrase", "profile", "我是设计师。", "小明是设计师", "xiaoming_job",
       "I'm a designer, as I said.", "Xiaoming is a designer", "xiaoming_job"),
    _c("mx-job-p2", "paraphrase", "profile", "I'm an accountant.", "Alice is an accountant", "alice_job",
       "我是做会计的。", "Alice是会计", "alice_job"),
    # -- pet renamed ----------------------------------------------------------------------------
    _c("en-pet-u1", "update", "profile", "My cat is called Mochi.", "Alice's cat is called Mochi", "alice_cat_name",
       "We renamed the cat to Biscuit.", "Alice's cat is called Biscuit", "alice_cat_name"),
    _c("en-pet-u2", "update", "profile", "My dog's name is Rex.", "Alice's dog is named Rex", "alice_dog_name",
       "The dog goes by Max now, the kids renamed him.", "Alice's dog is now named Max", "alice_dog"),
    _c("en-pet-p1", "paraphrase", "profile", "My cat is called Luna.", "Alice's cat is called Luna",
       "alice_cat_name", "Luna, my cat, is asleep.", "Alice has a cat named Luna", "alice_cat_name"),
    _c("en-pet-p2", "paraphrase", "profile", "I have a parrot named Kiwi.", "Alice has a parrot named Kiwi",
       "alice_parrot_name", "Kiwi is my parrot's name.", "Alice's parrot is called Kiwi", "alice_parrot"),
    _c("zh-pet-u1", "update", "profile", "我的猫叫咪咪。", "小明的猫叫咪咪", "xiaoming_cat_name",
       "我们给猫改名叫豆豆了。", "小明的猫叫豆豆", "xiaoming_cat_name"),
    _c("zh-pet-u2", "update", "profile", "我家狗叫旺财。", "小明家的狗叫旺财", "xiaoming_dog_name",
       "狗狗现在改叫来福了。", "小明的狗改名叫来福", "xiaoming_dog"),
    _c("zh-pet-p1", "paraphrase", "profile", "我的猫叫花花。", "小明的猫叫花花", "xiaoming_cat_name",
       "花花是我家的猫。", "小明家的猫名叫花花", "xiaoming_cat_name"),
    _c("zh-pet-p2", "paraphrase", "profile", "我养了一只叫团团的兔子。", "小明养了一只叫团团的兔子",
       "xiaoming_rabbit_name", "团团是我的兔子。", "小明的兔子叫团团", "xiaoming_rabbit"),
    _c("mx-pet-u1", "update", "profile", "我的狗叫小黑。", "小明的狗叫小黑", "xiaoming_dog_name",
       "We call the dog Shadow now.", "Xiaoming's dog is called Shadow", "xiaoming_dog_name"),
    _c("mx-pet-u2", "update", "profile", "My cat is named Tom.", "Alice's cat is named Tom", "alice_cat_name",
       "我们把猫改名叫年糕了。", "Alice的猫改名叫年糕", "alice_cat_name"),
    _c("mx-pet-p1", "paraphrase", "profile", "我的猫叫Lucky。", "小明的猫叫Lucky", "xiaoming_cat_name",
       "My cat Lucky says hi.", "Xiaoming's cat is named Lucky", "xiaoming_cat_name"),
    _c("mx-pet-p2", "paraphrase", "profile", "My hamster is Nugget.", "Alice's hamster is called Nugget",
       "alice_hamster_name", "我的仓鼠叫Nugget。", "Alice的仓鼠叫Nugget", "alice_hamster_name"),
    # -- age ----------------------------------------------------------------------------------------
    _c("en-age-u1", "update", "profile", "I'm 29.", "Alice is 29 years old", "alice_age",
       "Turned 30 yesterday!", "Alice is 30 years old", "alice_age"),
    _c("en-age-u2", "update", "profile", "I am thirty-four.", "Alice is thirty-four", "alice_age",
       "Now that I'm 35 I feel old.", "Alice is 35", "alice_age"),
    _c("en-age-p1", "paraphrase", "profile", "I'm 41.", "Alice is 41 years old", "alice_age",
       "At 41 I still run marathons.", "Alice is 41", "alice_age"),
    _c("en-age-p2", "paraphrase", "profile", "I was born in 1990.", "Alice was born in 1990", "alice_birth_year",
       "1990 was my birth year.", "Alice's birth year is 1990", "alice_birth_year"),
    _c("zh-age-u1", "update", "profile", "我今年25岁。", "小明今年25岁", "xiaoming_age",
       "我今天过生日，26岁了！", "小明26岁了", "xiaoming_age"),
    _c("zh-age-u2", "update", "profile", "我三十岁。", "小明三十岁", "xiaoming_age",
       "过了年我就三十一岁了，已经过完年了。", "小明三十一岁", "xiaoming_age"),
    _c("zh-age-p1", "paraphrase", "profile", "我18岁。", "小明18岁", "xiaoming_age",
       "我今年刚好18。", "小明今年18岁", "xiaoming_age"),
    _c("zh-age-p2", "paraphrase", "profile", "我是1995年出生的。", "小明1995年出生", "xiaoming_birth_year",
       "我生于1995年。", "小明生于1995年", "xiaoming_birth_year"),
    _c("mx-age-u1", "update", "profile", "我今年40岁。", "小明40岁", "xiaoming_age",
       "I'm 41 now.", "Xiaoming is 41", "xiaoming_age"),
    _c("mx-age-u2", "update", "profile", "I'm 22.", "Alice is 22", "alice_age",
       "我23岁了。", "Alice 23岁", "alice_age"),
    _c("mx-age-p1", "paraphrase", "profile", "我今年33岁。", "小明33岁", "xiaoming_age",
       "I'm 33.", "Xiaoming is 33", "xiaoming_age"),
    _c("mx-age-p2", "paraphrase", "profile", "I'm 50.", "Alice is 50", "alice_age",
       "我50岁。", "Alice 50岁", "alice_age"),
    # -- preference reversed --------------------------------------------------------------------------
    _c("en-pref-u1", "update", "preference", "I love coffee.", "Alice loves coffee", "alice_coffee",
       "I've gone off coffee completely, can't stand it now.", "Alice doesn't like coffee any more",
       "alice_coffee"),
    _c("en-pref-u2", "update", "preference", "I hate horror films.", "Alice hates horror films",
       "alice_horror_films", "Turns out I love horror films now!", "Alice loves horror films", "alice_horror"),
    _c("en-pref-p1", "paraphrase", "preference", "I really like jazz.", "Alice likes jazz", "alice_jazz",
       "Jazz is my favourite music.", "Alice's favourite music is jazz", "alice_jazz"),
    _c("en-pref-p2", "paraphrase", "preference", "I prefer tea to coffee.", "Alice prefers tea over coffee",
       "alice_drink", "Tea for me, always over coffee.", "Alice prefers tea to coffee", "alice_tea"),
    _c("zh-pref-u1", "update", "preference", "我很喜欢吃辣。", "小明喜欢吃辣", "xiaoming_spicy",
       "我现在不吃辣了，胃受不了。", "小明不再吃辣", "xiaoming_spicy"),
    _c("zh-pref-u2", "update", "preference", "我讨厌跑步。", "小明讨厌跑步", "xiaoming_running",
       "最近我爱上了跑步。", "小明爱上了跑步", "xiaoming_running"),
    _c("zh-pref-p1", "paraphrase", "preference", "我喜欢看科幻小说。", "小明喜欢看科幻小说", "xiaoming_scifi",
       "科幻小说是我的最爱。", "小明最爱科幻小说", "xiaoming_scifi"),
    _c("zh-pref-p2", "paraphrase", "preference", "我爱喝绿茶。", "小明爱喝绿茶", "xiaoming_tea",
       "绿茶是我最喜欢的饮料。", "小明最喜欢的饮料是绿茶", "xiaoming_drink"),
    _c("mx-pref-u1", "update", "preference", "我喜欢猫。", "小明喜欢猫", "xiaoming_cats",
       "I don't like cats any more after the scratch.", "Xiaoming no longer likes cats", "xiaoming_cats"),
    _c("mx-pref-u2", "update", "preference", "I'm vegetarian.", "Alice is vegetarian", "alice_diet",
       "我现在开始吃肉了。", "Alice现在吃肉", "alice_diet"),
    _c("mx-pref-p1", "paraphrase", "preference", "我喜欢爵士乐。", "小明喜欢爵士乐", "xiaoming_jazz",
       "I love jazz.", "Xiaoming loves jazz", "xiaoming_jazz"),
    _c("mx-pref-p2", "paraphrase", "preference", "I like hiking.", "Alice likes hiking", "alice_hiking",
       "我喜欢徒步。", "Alice喜欢徒步", "alice_hiking"),
    # -- plan cancelled -----------------------------------------------------------------------------
    _c("en-plan-u1", "update", "task_state", "I'm flying to Tokyo in May.", "Alice plans to fly to Tokyo in May",
       "alice_may_trip", "The Tokyo trip is off, we cancelled it.", "Alice cancelled her May trip to Tokyo",
       "alice_may_trip"),
    _c("en-plan-u2", "update", "task_state", "My wedding is on June 5.", "Alice's wedding is on June 5",
       "alice_wedding_date", "We moved the wedding to September 12.", "Alice's wedding is on September 12",
       "alice_wedding"),
    _c("en-plan-p1", "paraphrase", "task_state", "I'm running the Boston marathon in April.",
       "Alice will run the Boston marathon in April", "alice_marathon",
       "Training for Boston in April!", "Alice is training for the Boston marathon in April", "alice_marathon"),
    _c("en-plan-p2", "paraphrase", "task_state", "I'll start my MBA in the autumn.",
       "Alice will start an MBA in the autumn", "alice_mba", "The MBA begins this autumn for me.",
       "Alice's MBA starts in the autumn", "alice_study_plan"),
    _c("zh-plan-u1", "update", "task_state", "我下个月要去云南旅游。", "小明计划下个月去云南旅游",
       "xiaoming_trip", "云南的旅行取消了。", "小明取消了云南旅行", "xiaoming_trip"),
    _c("zh-plan-u2", "update", "task_state", "我打算明年考研。", "小明打算明年考研", "xiaoming_exam_plan",
       "我不考研了，决定直接工作。", "小明决定不考研，直接工作", "xiaoming_plan"),
    _c("zh-plan-p1", "paraphrase", "task_state", "我周六要去爬山。", "小明周六要去爬山", "xiaoming_saturday",
       "周六我准备去爬山。", "小明准备周六爬山", "xiaoming_saturday"),
    _c("zh-plan-p2", "paraphrase", "task_state", "我明年春天要结婚。", "小明明年春天结婚", "xiaoming_wedding",
       "婚礼定在明年春天。", "小明的婚礼在明年春天", "xiaoming_wedding_plan"),
    _c("mx-plan-u1", "update", "task_state", "我五月去巴黎出差。", "小明五月去巴黎出差", "xiaoming_paris_trip",
       "The Paris business trip got cancelled.", "Xiaoming's Paris business trip was cancelled",
       "xiaoming_paris_trip"),
    _c("mx-plan-u2", "update", "task_state", "I'm moving house next week.", "Alice is moving house next week",
       "alice_moving", "搬家推迟到下个月了。", "Alice的搬家推迟到下个月", "alice_moving"),
    _c("mx-plan-p1", "paraphrase", "task_state", "我下周去北京开会。", "小明下周去北京开会",
       "xiaoming_beijing_meeting", "I have a meeting in Beijing next week.",
       "Xiaoming has a meeting in Beijing next week", "xiaoming_beijing_meeting"),
    _c("mx-plan-p2", "paraphrase", "task_state", "I'm taking a Japanese course this summer.",
       "Alice is taking a Japanese course this summer", "alice_japanese_course",
       "这个夏天我要上日语课。", "Alice这个夏天上日语课", "alice_japanese_course"),
]

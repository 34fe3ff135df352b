"""The word lists of :mod:`.lexicon`: space-separated words, lower case, one string per
part of speech and language. Data only.

A word that is as often a name as a word is left out on purpose (see :mod:`.lexicon`):
"mark", "bill", "rose", "grace", "joy", "faith", "hope" (a verb is kept), "jack",
"frank", "king", "queen", "apple", "orange", "shell", "luz", "paz", "rosa", "porto",
"costa", "rio".
"""

__all__ = [
    "CALENDAR",
    "EN_ADJECTIVES",
    "EN_IRREGULAR",
    "EN_MORE_ADJECTIVES",
    "EN_MORE_NOUNS",
    "EN_MORE_OTHER",
    "EN_MORE_VERBS",
    "EN_NOUNS",
    "EN_OTHER",
    "EN_VERBS",
    "ES_FORMS",
    "ES_MORE",
    "ES_VERBS",
    "ES_WORDS",
    "FUNCTION",
    "INTERJECTIONS",
    "PT_FORMS",
    "PT_MORE",
    "PT_VERBS",
    "PT_WORDS",
]

FUNCTION = """
i me my mine myself you your yours yourself yourselves he him his himself she her hers
herself it its itself we us our ours ourselves they them their theirs themselves one
a an the this that these those some any no none every each either neither both all few
many much more most less least several such other another own same
and or but nor so yet for because since although though while whereas if unless until till
than as whether of in on at by to from with without within into onto upon about above below
over under between among through throughout during before after behind beside besides
beyond against toward towards across along around near off out up down via per despite
except like unlike
is am are was were be been being have has had having do does did doing done will would
shall should can could may might must ought cannot gonna wanna gotta
not never always often sometimes usually also too very really just only even still already
again soon now then here there where when why how what which who whom whose whatever
whenever wherever whoever however today tonight tomorrow yesterday lately recently maybe
perhaps probably actually anyway anyways otherwise meanwhile therefore thus hence indeed
instead almost enough quite rather somewhat else ever once twice
somebody someone something somewhere anybody anyone anything anywhere everybody everyone
everything everywhere nobody nothing nowhere
i'm i've i'll i'd you're you've you'll you'd he's she's it's we're we've we'll we'd
they're they've they'll they'd that's there's here's what's who's where's how's let's
don't doesn't didn't isn't aren't wasn't weren't won't wouldn't can't couldn't shouldn't
haven't hasn't hadn't ain't y'all

eu tu você vocês ele ela eles elas nós vós lhe lhes mim ti si comigo contigo consigo
o os as um uma uns umas meu minha meus minhas teu tua teus tuas seu sua seus suas nosso
nossa nossos nossas dele dela deles delas este esta estes estas esse essa esses essas
aquele aquela aqueles aquelas isto isso aquilo do da dos das em no na nos nas num numa
pelo pela pelos pelas para pra pro com sem sob sobre entre até desde contra após perante
ao aos à às e ou mas porém contudo todavia pois porque porquê que quê quando como onde
aonde quem qual quais quanto quanta quantos quantas cujo cuja embora enquanto logo também
já ainda sempre nunca jamais talvez só apenas muito muita muitos muitas pouco pouca
poucos poucas mais menos tão tanto tanta tantos tantas todo toda todos todas tudo nada
algo alguém ninguém algum alguma alguns algumas nenhum nenhuma outro outra outros outras
cada qualquer aqui ali aí lá cá hoje ontem amanhã agora depois antes cedo tarde sim não
é são era eram foi foram ser estar está estão estava estou sou somos ter tem têm tinha
tenho temos há havia vai vou vamos vão ia fica pode posso podes podemos devo deve devemos
devia deveria deverias poderia seria será sido sendo sou estás tens te se me lho lha
assim além juntos juntas

yo usted ustedes él ellos ellas nosotros nosotras vosotros vosotras le les os mí conmigo
lo la los las el mi mis tus su sus nuestro nuestra nuestros nuestras vuestro vuestra
estos ese esos aquel aquella aquellos aquellas esto eso aquello de del en por con sin
hasta hacia según durante mediante al y u ni pero sino aunque pues si cuando donde dónde
cuándo cómo qué quién quiénes cuál cuáles cuánto cuánta cuántos cuántas adónde cuyo
tampoco ya aún todavía siempre quizá quizás tal solo sólo muy mucho mucha muchos muchas
poco poca pocos pocas más tan tanto tanta todo toda todos todas algo alguien nadie algún
alguno alguna algunos algunas ningún ninguno ninguna otro otra otros otras cualquier allí
ahí allá acá hoy ayer ahora después luego pronto temprano sí es son eran fue fueron
estoy están estaba estás tiene tienen tenía tengo tenemos tienes hay había va voy van
iba puede puedo podemos puedes debo debe debemos debes debería deberías deberíamos
podría podrías sería será siendo hace hizo unos te se me nos así además también
esa esas este esta mucho juntos juntas
"""

INTERJECTIONS = """
hi hey heya hiya hello howdy yo greetings bye byebye goodbye cheers thanks thank thankyou
thx ty tysm congrats congratulations welcome sorry please pls plz oh ooh ohh ah ahh aha
ha hah haha hahaha hahahaha hehe heh lol lmao lmfao rofl omg omfg wow whoa woah yay
yaay hooray hurray ugh uh uhh um umm hmm hmmm hm meh phew oops whoops huh alas gosh
geez jeez damn dang darn yikes aw aww awww alright nah yeah yep yup nope okay ok okey
okie dear btw imo imho tbh idk fyi asap brb omw np jk ikr smh wtf xoxo xo bless amen
bravo kudos voila yess yesss yasss ya

olá ola oi oie alô tchau adeus obrigado obrigada obrigadão obg brigado valeu parabéns
bem-vindo bem-vinda bem-vindos desculpa desculpe desculpem perdão claro exato exacto
exatamente certo né tá beleza opa epa eita caramba puxa poxa uau ufa ai ui hum kkk kkkk
kkkkk rsrs rs bom boa enfim então bem aliás olha olhe vá bora pronto prontos ok fixe
bom-dia boa-noite boa-tarde eba oba putz uhu uhuu ei nossa affe aff

hola holi adiós chao chau gracias felicidades felicitaciones enhorabuena bienvenido
bienvenida bienvenidos perdón perdona perdone disculpa disculpe vale bueno buenas vaya
ay uy oye mira mire venga anda hombre jaja jajaja jajajaja jeje guau ojalá olé caray
órale dale listo entonces bien qué tal saludos
"""

CALENDAR = """
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs
fri sat sun january february march april may june july august september october november
december jan feb mar apr jun jul aug sep sept oct nov dec
segunda terça quarta quinta sexta sábado domingo segunda-feira terça-feira quarta-feira
quinta-feira sexta-feira janeiro fevereiro março abril maio junho julho agosto setembro
outubro novembro dezembro
lunes martes miércoles jueves viernes enero febrero marzo mayo junio julio septiembre
setiembre octubre noviembre diciembre
"""

EN_VERBS = """
be have do say get make go know take see come think look want give use find tell ask work
seem feel try leave call keep let begin start show hear play run move live believe hold
bring happen write provide sit stand lose pay meet include continue set learn change lead
understand watch follow stop create speak read allow add spend grow open walk win offer
remember love consider appear buy wait serve die send expect build stay fall cut reach
remain suggest raise pass sell require report decide pull return explain hope develop
carry break receive agree support hit produce eat cover catch draw choose cause point
listen realize realise enjoy thank guess imagine wish miss plan visit travel cook bake
paint dance sing swim drive fly ride climb hike join share post check finish teach study
help like hate need wonder worry relax rest sleep wake celebrate laugh smile cry hug kiss
apologize apologise promise prefer mean sound hang chat talk text message email reply
answer search explore discover notice forget forgive trust admire appreciate adore treat
fix clean wash shop order pick drop fill fit save earn borrow lend rent manage organize
organise prepare practice practise train improve achieve succeed fail struggle survive
recover heal become look seem sound feel picture inspire motivate encourage push keep
stick speak thank welcome hang pray believe sign attend host invite throw toss grab
bring check try taste smell touch turn close lock unlock upload download film record
snap shoot capture frame print draw sketch knit sew craft garden plant volunteer donate
mentor coach adopt rescue foster walk jog bike cycle skate ski surf sail camp fish hunt
stream binge watch rewatch recommend review rate suggest mention describe update
"""

EN_IRREGULAR = """
was were been am is are had has did does said got gotten made went gone knew known took
taken saw seen came thought looked gave given found told felt left kept began begun
showed shown heard ran held brought wrote written sat stood lost paid met led understood
spoke spoken grew grown won bought sent built fell fallen caught drew drawn chose chosen
ate eaten taught slept woke woken swam drove driven flew flown rode ridden hit cut put set
let became forgot forgotten forgave forgiven sang sung hung threw thrown broke broken
spent meant sold stuck shot dug fed led lit quit read shut spread struck swore sworn tore
torn wore worn began drank drunk rang rung sank sunk
"""

EN_ADJECTIVES = """
good great nice fine cool awesome amazing wonderful fantastic fabulous excellent perfect
lovely beautiful pretty cute sweet gorgeous stunning brilliant incredible terrific superb
splendid marvelous marvellous outstanding remarkable impressive glad happy sad sorry
excited exciting tired bored boring interested interesting funny fun hilarious crazy wild
weird strange odd lucky unlucky proud grateful thankful blessed busy free ready sure
certain true false real right wrong correct exact new old young big small little large
huge tiny tall short long high low hot cold warm wet dry hard soft easy difficult tough
simple quick fast slow early late full empty rich poor cheap expensive safe dangerous
healthy sick ill strong weak bright dark light heavy clean dirty quiet loud calm peaceful
important special favorite favourite main whole entire total final recent current
previous different similar various open closed fresh delicious tasty yummy epic massive
major minor serious honest kind gentle friendly lonely afraid scared nervous anxious
worried stressed relaxed chill angry mad upset jealous alone alive dead awake asleep best
better worse worst super extra complete unforgettable memorable inspiring inspired
motivated passionate creative curious positive negative possible impossible likely
unlikely necessary useful helpful meaningful powerful colorful colourful thoughtful
awful terrible horrible bad poor nasty gross fancy smart clever wise silly stupid dumb
brave bold shy rare common normal usual typical natural basic general specific clear
obvious simple tricky proper fair deep wide broad thick thin flat round sharp smooth
rough red blue green yellow orange purple pink brown black white grey gray golden silver
huge glad stoked thrilled pumped psyched hyped keen eager fond aware unaware familiar
local global public private social personal physical mental emotional spiritual
financial professional amazing cozy cosy comfy comfortable uncomfortable fit unfit pure
honest hopeful hopeless careful careless beautiful wonderful joyful painful useless
harmless endless countless priceless
"""

EN_NOUNS = """
time day week month year morning afternoon evening night weekend hour minute moment life
world home house work job school class college family friend kid child children baby
parent mom mum dad people person man men woman women guy girl boy team group party game
movie film book song music art picture photo pic video story news idea plan trip travel
vacation holiday weather rain snow sunshine summer winter spring autumn fall food dinner
lunch breakfast coffee tea water beer wine place city town country road car bus train
plane beach park garden dog cat pet health love hope luck thing stuff way lot bit problem
question answer reason point part piece side end start beginning top bottom front back
word name number money price gift present birthday wedding meeting event concert show
project business company office career experience journey adventure dream goal success
support help advice tip chance opportunity change choice decision mind heart soul body
head hand eye face voice feeling mood energy peace happiness sadness stress pain fear
anger passion community society culture nature sea ocean mountain lake river sky star
moon earth color colour pottery painting drawing dance yoga workout exercise gym sport
football soccer basketball baseball tennis golf race marathon hike camping fishing
cooking baking reading writing gaming chess guitar piano drum violin festival museum
gallery library shop store market restaurant cafe bar hotel hospital church clinic
university boss colleague neighbor neighbour teacher doctor nurse chef artist writer
student sister brother mother father wife husband partner son daughter cousin aunt uncle
grandma grandpa girlfriend boyfriend everything thanks trouble fault deal hell god
heaven kitchen room bed table door window phone computer laptop internet
email message text post photo camera light fire glass cup plate bottle bag box shoe
dress shirt hat clothes gear tool toy ball card letter paper pen note list page chapter
series season episode show channel podcast blog app website site tech technology
science history math maths lesson course degree exam test homework grade project
speech talk conversation chat discussion debate argument fight peace war news article
issue topic subject detail fact truth lie secret surprise joke laugh smile tear tears
memory memories moment break rest sleep dream nightmare shower bath
flight ticket seat line queue crowd audience fan fans player coach captain leader member
volunteer charity cause donation fundraiser shelter animal animals bird fish horse
puppy kitten flower flowers tree trees grass leaf forest field farm hill valley island
coast shore wave waves sand sunset sunrise view scenery landscape road street corner
block neighborhood neighbourhood area region state nation border
"""

EN_OTHER = """
definitely absolutely totally exactly honestly seriously basically literally finally
hopefully luckily unfortunately fortunately obviously clearly certainly surely possibly
usually normally generally especially particularly truly simply quickly slowly suddenly
immediately eventually somehow together apart ahead away forward inside outside
upstairs downstairs later earlier nearly fairly super pretty wish speaking talking
anyhow overall personally apparently sadly happily mostly
one two three four five six seven eight nine ten first second third last next
um uma dois duas três quatro cinco seis sete oito nove dez primeiro segundo terceiro
próximo último uno dos tres cuatro cinco seis siete ocho nueve diez primero tercero
"""

PT_VERBS = """
ser estar ter haver ir fazer dizer poder dever querer saber ver dar ficar vir chegar
passar gostar adorar amar achar pensar falar conhecer encontrar visitar viajar voltar
começar acabar trabalhar morar viver comprar comer beber ler escrever jogar ouvir sentir
lembrar esquecer esperar precisar tentar levar trazer tomar usar abrir fechar ganhar
perder mudar ajudar olhar imaginar sair entrar dormir acordar cozinhar pintar dançar
cantar correr caminhar nadar estudar aprender ensinar tornar celebrar festejar partilhar
compartilhar adorar agradecer pedir perguntar responder contar mostrar descobrir criar
jantar almoçar passear conversar namorar casar nascer crescer sonhar acreditar
combinar marcar ligar chamar mandar enviar receber decidir escolher preferir organizar
preparar planear planejar reservar pagar limpar arrumar descansar relaxar treinar
apanhar buscar continuar acompanhar convidar visitar perceber entender explicar
"""

PT_FORMS = """
sou é somos são era eram fui foi fomos foram estou está estamos estão estava estive
esteve tenho tem temos têm tinha tive teve há havia houve vou vai vamos vão ia faço faz
fazemos fazem fiz fez feito digo diz dizemos dizem disse dito posso pode podemos podem
podia pude pôde devo deve devemos devem devia deveria quero quer queremos querem queria
quis sei sabe sabemos sabem sabia soube vejo vê vemos veem vi viu visto dou dá damos dão
dei deu dado fico fica ficamos ficam fiquei ficou venho vem vimos vêm vim veio cheguei
chegou passei passou gosto gosta gostamos gostam gostei gostou adoro adora adorei adorou
amo ama amei amou acho acha achei achou penso pensa pensei pensou falo fala falei falou
conheço conhece conheci conheceu encontrei encontrou visitei visitou viajei viajou
voltei voltou comecei começou acabei acabou trabalho trabalha trabalhei trabalhou moro
mora morei morou vivo vive vivi viveu comprei comprou como come comi comeu bebo bebe
bebi bebeu leio lê li leu escrevo escreve escrevi escreveu jogo joga joguei jogou ouço
ouve ouvi ouviu sinto sente senti sentiu lembro lembra lembrei lembrou esqueci esqueceu
espero espera esperei esperou preciso precisa precisei tento tenta tentei tentou levei
levou trouxe tomei tomou uso usa usei usou abri abriu fechei fechou ganhei ganhou perdi
perdeu mudei mudou ajudo ajuda ajudei ajudou olha olhe olhei olhou imagina imagine
imaginei saio sai saí saiu entrei entrou durmo dorme dormi dormiu acordei acordou
cozinhei cozinhou pintei pintou dancei dançou cantei cantou corri correu caminhei
caminhou nadei nadou estudo estuda estudei estudou aprendi aprendeu ensinei ensinou
tornei tornou celebrei celebrou partilhei partilhou agradeço peço pedi pediu pergunto
perguntei perguntou respondi respondeu conto contei contou mostrei mostrou descobri
descobriu criei criou jantei almocei passeei conversei casei nasci nasceu cresci cresceu
sonhei acredito acreditei vê-se diga digam vamos vejam veja espera esperem
"""

PT_WORDS = """
bom bonito lindo ótimo óptimo excelente perfeito maravilhoso incrível fantástico
espetacular espectacular giro fixe legal bacana feliz triste contente cansado ocupado
livre pronto certo errado verdadeiro novo velho jovem grande pequeno enorme alto baixo
longo curto quente frio fácil difícil simples rápido lento cheio vazio rico pobre barato
caro seguro perigoso saudável doente forte fraco claro escuro limpo sujo calmo importante
especial favorito preferido principal único inteiro final próximo último mesmo diferente
igual próprio aberto fechado fresco delicioso gostoso sério honesto simpático querido
sozinho vivo morto melhor pior interessante engraçado estranho louco orgulhoso grato
agradecido animado entusiasmado nervoso preocupado chateado zangado tranquilo possível
impossível provável necessário útil genial top divertido real total incrível brutal
dia semana mês ano manhã noite fim hora minuto momento vida mundo casa trabalho emprego
escola aula família amigo filho pessoa gente homem mulher criança bebé bebê pais mãe pai
irmão irmã equipa equipe grupo festa jogo filme livro música canção arte foto fotografia
vídeo história notícia ideia plano viagem férias tempo chuva sol praia cidade país rua
carro comida jantar almoço café água cerveja vinho cão gato saúde amor sorte coisa
problema pergunta resposta parte começo nome dinheiro presente aniversário casamento
reunião projeto projecto empresa escritório carreira experiência sonho objetivo ajuda
conselho dica mudança escolha cabeça coração corpo mão olho voz sentimento natureza mar
montanha lago céu estrela lua terra cor dança ioga ginásio desporto esporte futebol
corrida cozinha leitura escrita guitarra piano concerto museu loja restaurante hotel
hospital igreja universidade professor médico enfermeiro chefe colega vizinho sobrinho
neto avó avô tio tia primo namorado noivo marido esposa saudade saudades verdade mentira
parabéns fim-de-semana
"""

ES_VERBS = """
ser estar tener haber ir hacer decir poder deber querer saber ver dar quedar venir
llegar pasar gustar encantar amar creer pensar hablar conocer encontrar visitar viajar
volver empezar comenzar terminar acabar trabajar vivir comprar comer beber leer escribir
jugar escuchar oír sentir recordar olvidar esperar necesitar intentar llevar traer tomar
usar abrir cerrar ganar perder cambiar ayudar mirar imaginar salir entrar dormir
despertar cocinar pintar bailar cantar correr caminar nadar estudiar aprender enseñar
celebrar compartir agradecer pedir preguntar responder contar mostrar descubrir crear
cenar almorzar pasear charlar casar nacer crecer soñar
combinar quedar llamar mandar enviar recibir decidir elegir preferir organizar preparar
planear reservar pagar limpiar ordenar descansar relajar entrenar buscar continuar
acompañar invitar entender explicar
"""

ES_FORMS = """
soy eres es somos son era eran fui fue fuimos fueron estoy estás está estamos están
estaba estuve estuvo tengo tienes tiene tenemos tienen tenía tuve tuvo hay había hubo he
ha hemos han voy vas va vamos van iba hago haces hace hacemos hacen hice hizo hecho digo
dices dice decimos dicen dije dijo dicho puedo puedes puede podemos pueden podía pude
pudo debo debes debe debemos deben debía quiero quieres quiere queremos quieren quería
quise sé sabes sabe sabemos saben sabía supe veo ves ve vemos ven vi vio visto doy das
da damos dan di dio dado quedo queda quedé quedó vengo vienes viene venimos vienen vine
vino llegué llegó pasé pasó gusta gustan gustó encanta encantan encantó amo ama amé amó
creo cree creí creyó pienso piensa pensé pensó hablo habla hablé habló conozco conoce
conocí conoció encontré encontró visité visitó viajé viajó volví volvió empecé empezó
comencé comenzó terminé terminó acabé acabó trabajo trabaja trabajé trabajó vivo vive
viví vivió compré compró como come comí comió bebo bebe bebí bebió leo lee leí leyó
escribo escribe escribí escribió juego juega jugué jugó escucho escucha escuché escuchó
oigo oye oí oyó siento siente sentí sintió recuerdo recuerda recordé recordó olvidé
olvidó espero espera esperé esperó necesito necesita necesité intento intenta intenté
intentó llevo lleva llevé llevó traje trajo tomo toma tomé tomó uso usa usé usó abrí
abrió cerré cerró gané ganó perdí perdió cambié cambió ayudo ayuda ayudé ayudó mira mire
miré miró imagina imagínate imaginé salgo sale salí salió entré entró duermo duerme
dormí durmió desperté cociné cocinó pinté pintó bailé bailó canté cantó corrí corrió
caminé caminó nadé nadó estudio estudia estudié estudió aprendí aprendió enseñé enseñó
celebré celebró compartí compartió agradezco pido pedí pidió pregunto pregunté preguntó
respondí respondió cuento conté contó mostré mostró descubrí descubrió creé creó cené
almorcé paseé charlé nací nació crecí creció soñé oye escucha vamos mira fíjate
"""

ES_WORDS = """
bueno buen malo mal bonito lindo precioso hermoso guapo genial excelente perfecto
maravilloso increíble fantástico estupendo espectacular feliz triste contento cansado
ocupado libre listo cierto seguro verdadero nuevo viejo joven grande pequeño enorme alto
bajo largo corto caliente frío fácil difícil simple rápido lento lleno vacío rico pobre
barato caro peligroso sano enfermo fuerte débil claro oscuro limpio sucio tranquilo
importante especial favorito preferido principal único entero final próximo último mismo
diferente igual propio abierto cerrado fresco delicioso sabroso serio honesto simpático
amable querido vivo muerto mejor peor interesante divertido gracioso raro extraño loco
orgulloso agradecido emocionado nervioso preocupado enfadado enojado posible imposible
probable necesario útil chulo bárbaro brutal total real
día semana mes año noche fin hora minuto momento vida mundo casa trabajo empleo escuela
clase familia amigo hijo persona gente hombre mujer niño bebé padres madre padre
hermano hermana equipo grupo fiesta juego partido película libro música canción arte
foto vídeo video historia noticia idea plan viaje vacaciones tiempo lluvia sol playa
ciudad país calle coche carro comida cena almuerzo desayuno café agua cerveza vino perro
gato salud amor suerte cosa problema pregunta respuesta parte nombre dinero regalo
cumpleaños boda reunión proyecto empresa oficina carrera experiencia sueño meta ayuda
consejo cambio cabeza corazón cuerpo mano ojo voz sentimiento naturaleza mar montaña
lago cielo estrella luna tierra color baile yoga gimnasio deporte fútbol cocina lectura
guitarra piano concierto museo tienda restaurante hotel hospital iglesia universidad
profesor médico enfermero jefe colega vecino sobrino nieto abuelo abuela tío tía primo
novio esposo esposa verdad mentira
"""

EN_MORE_VERBS = """
remind cherish chase count bet rock spill tackle gather mix dye impress admit adapt blog
challenge combine connect cross cuddle dig discuss empower face gain handle incorporate
invest juggle market marry network overcome parent put reflect represent research score
source spread step stretch strive surround track transition unite uplift act accept
accomplish acknowledge afford aim amaze annoy apply approach arrange arrive attach attempt
avoid bear beat beg behave belong bend bite blame bless blow boil bore bother bounce bow
brainstorm breathe brew browse brush budget bump burn bury calm care charge chill chop
claim clap clear click collect comment commit compare compete complain complete compose
concentrate confess confirm contact contain contribute control convince cope copy correct
cost crash crave crawl crush cure curl damage dare date deal debate decorate defend delay
deliver demand deny depend deserve design destroy detect determine devote dine direct
disagree disappear disappoint dislike display dive divide doubt drag drain dream dress
drift drink drown dust educate embrace emerge employ encounter end engage enter entertain
escape establish estimate examine exchange excite exist expand experience experiment
explode express extend fade fancy fear feed fetch fight figure file fire flash float flow
fold fool force form freeze frighten fry fuel gaze glow glue grab grant greet grill grin
grip guard guide hand harm head heat hide hire honor honour hook hop hurry hurt identify
ignore illustrate increase influence inform injure insist install intend interrupt
introduce invent investigate involve joke judge jump kick kneel knock label land last
launch lay lie lift limit link list load locate lock long match matter measure melt
memorize mend mess mind moan mourn nap navigate nod note obey observe obtain occur offend
operate oppose owe pack paddle participate paste pause perform permit persuade phone pin
place plant please plug polish pop pose possess pour pray preach predict present preserve
press pretend prevent print proceed process progress prompt protect prove publish pump
punch purchase pursue qualify question race rain rank rate react recognize recognise
reduce refer refuse regret reject relate release rely remove renew repair repeat replace
request reserve resist resolve respect respond restore retire reveal reward rid ring rise
risk roast roll rub rush sail satisfy scan scare schedule scream scroll seal seek select
settle shake shape shave shift shine shiver shout shrug sigh skip slide slip smash sneak
snow soak solve sort spare spark spell spin spoil spot spray sprint squeeze stack stare
starve state steal steer stir store strengthen stress strike stroll struggle stuff submit
suffer suit supply suppose surprise suspect swap sweep swing switch tap target tear tease
tempt tend test thrive tick tidy tie tip tire toast tolerate top transform trap trek trip
trouble tuck tune twist type unpack upgrade urge value vary view vote wander warm warn
waste wave weigh whisper wipe wrap yell zoom bless scroll vibe
"""

EN_MORE_ADJECTIVES = """
absolute active actual adorable adult alert ancient annual artistic athletic attractive
authentic available average balanced bitter blank blind bloody brief broken capable
casual charming cheerful chilly chubby civil classic classical cloudy clumsy commercial
compact competitive complex confident confused conscious constant content contemporary
crazy creepy crisp critical crowded cruel cultural daily damp dear decent delicate
delightful dense dependent desperate detailed determined digital direct disappointed
distant divine domestic double dramatic dreamy drunk dull dusty eastern economic
educational effective efficient elderly electric electronic elegant empty energetic
enormous environmental equal essential eternal ethical everyday evil exceptional
exclusive exhausted existing exotic expert extreme faithful famous fascinating
fashionable fatal fearless federal festive fierce firm flexible fluffy foggy foolish
foreign formal former fortunate fragile frequent frightened frozen frustrated fuzzy
generous genuine giant gifted glamorous glorious graceful gradual grand greasy greedy
grumpy guilty handsome handy harsh heartfelt heavenly helpless hidden historic holy
homemade horrible hostile humble humid hungry hurt icy ideal identical idle illegal
imaginary immediate immense independent indoor industrial infinite informal initial
innocent intense internal international intimate invisible jolly juicy junior lame lazy
leading lean legal legendary lengthy liberal lifelong limited literary lively living
logical loose lost loyal luxurious magic magical magnificent male manual marine married
mature maximum mean medical medium mellow messy mighty mild military minimum miserable
mobile modern modest moral muddy multiple musical mutual mysterious naive narrow native
naughty neat neutral noble noisy northern notable novel numerous occasional official
ongoing optimistic optional oral ordinary organic original outdoor outer outgoing
overwhelming pale parallel partial particular past patient permanent pleasant pleased
plain polite political popular portable potential practical precious precise pregnant
premium present primary prime productive profound prominent promising protective radical
rapid rational raw realistic reasonable recent regional regular relaxing relevant
reliable religious remote responsible retired rewarding ridiculous rigid romantic rotten
royal rude rural sacred salty scary scientific seasonal secondary secret secure senior
sensible sensitive separate severe shallow shiny shocking significant silent single
skinny sleepy slight slim slippery sneaky snowy sober solar solid sophisticated sore
sour southern spacious spare specific spicy spontaneous stable steady steep sticky stiff
stormy straight stressful strict striking stubborn stylish subtle successful sudden
sufficient suitable sunny superior supportive surprised surprising suspicious
sustainable sweaty swift symbolic sympathetic talented tender tense thick thin thirsty
thorough tidy tight timely total toxic traditional tragic tremendous tropical troubled
trusting ugly ultimate unable unconditional underground unexpected unfair unhappy unique
united universal unknown unusual upbeat upcoming upper urban urgent vague valid valuable
various vast verbal vibrant victorious vintage violent virtual visible visual vital vivid
vocal wealthy weekly western wicked willing wise wooden worldwide worthy yearly youthful
dairy sugary vegan vegetarian gluten spicy cozy nerdy geeky sporty crafty artsy
"""

EN_MORE_NOUNS = """
ability access account action activity actor address advantage affair age agency
agreement air airport alarm album alcohol allergy alternative ambition amount
anniversary announcement anxiety apartment appearance appetite application appointment
appreciation area argument arm army arrival article aspect assignment assistance
atmosphere attempt attention attitude author award awareness background balance ball
band bank base basis basket battery battle bean bear beauty bedroom bee beef behavior
behaviour belief bell belt bench benefit bicycle bike bird birth biscuit blanket
blessing blood blossom board boat bone bonus boost bowl brain branch brand bread breath
breeze brick bride bridge bubble bucket bug building bunch burger butter button cabin
cake calendar campaign campus cancer candle candy canvas cap capital captain carpet cart
case cash castle celebration cell center centre ceremony chain chair champion
championship chapter character chart cheek cheese chemistry chest chicken childhood chip
chocolate choir circle circumstance claim clay client climate clock closet cloth clothing
cloud club clue coat coconut code coin collection comedy comfort commitment committee
comparison competition complaint concept concern conclusion condition confidence conflict
confusion connection consequence consideration contest context contract contribution
cookie corn costume cottage couch counter couple courage course court cover craft crew
crime crisis crop crown cruise culture cupcake curiosity curtain customer cycle danger
darkness data deadline death debt decade deck degree delight department deposit
depression description desert design desire desk dessert destination development device
diary diet difference difficulty direction director dirt disaster discipline discount
discovery disease dish display distance district doll donation dose dot dough draft
drama duck duty ear earring ease economy edge edition education effect effort egg
election element elephant emergency emotion employee employer encouragement enemy engine
engineer enthusiasm entrance entry environment episode equipment error essay estate
evidence example excitement excuse exhibit exhibition exit expense explanation expression
extension fabric factor factory failure fame fare farm fashion fat fate favor favour
feast feature fee feedback fence fever figure finding finger fitness flag flavor flavour
floor flour flu focus folk foot fortune foundation fountain frame freedom fridge
friendship fruit fuel function funeral fur furniture future gap garage garbage gas gate
gathering gender generation glove gold government graduation grain grandchild
grandparent gratitude grave gravity ground growth guess guest guidance guide guilt gun
habit hair half hall harbor harbour hate height hero highlight hint hobby hole honey
honor horizon horror horse host household housing human humor humour hunger hurricane
ice icon identity illness image imagination impact importance impression improvement
incident income independence industry infant information injury ink insect insight
inspiration instance instrument insurance intention interest interview introduction
invitation item jacket jar jeans jewelry jewellery journal juice jungle junk justice key
keyboard kindness kiss kite knee knife knowledge lab label labor labour lack ladder lady
lamp land landscape language laughter laundry law lawn layer leader leadership league
lecture leg legacy legend leisure length lifestyle lift limit lip liquid literature load
loan location log loss lottery machine magazine magic mail maintenance majority makeup
mall manner map mask mass master match material matter maximum meal meaning measure meat
media medicine melody member membership menu mess metal method middle midnight
milestone milk minority miracle mirror mission mistake model monitor monster motion
motivation motor mouse mouth movement mud mug muscle mushroom mystery nail nation neck
need needle nerve nest net network newspaper noise noodle nose notebook notice novel
object objective occasion offer officer oil opening opera operation opinion option order
organization organisation origin outcome outfit oven owner pace pack package pain paint
pair palace pan pancake panel parade parking participant pass password pasta patience
pattern pause pay peak pen pencil pepper performance period permission personality
perspective phase photograph photography phrase picnic pie pig pile pill pillow pilot
pink pipe pizza planet plant plate platform player pleasure plot pocket poem poet poetry
police policy pool population portion portrait position possibility poster pot potato
pound power practice prayer preference preparation presence presentation president
pressure pride priest prince principle print priority prison privacy prize process
product production profession professor profile profit program programme progress
promise promotion proof property proposal protection protest purpose purse puzzle
quality quantity quarter quiz quote radio rainbow range rate reaction reader reality
recipe recognition record recovery reflection relationship relative relief religion
remark reminder rent repair reputation request resident resource respect response
responsibility result retirement return review reward rhythm rice ring risk robot rock
role roof root rope routine row rule sake salad salary sale salt sample sandwich
satisfaction sauce scale scene schedule scheme scholarship score screen script search
seat section security seed selection self sense series service session setback setting
shadow shame shape share sheep shelf shelter shift ship shirt shock shoe shopping shot
shoulder sight sign signal silence silk singer sink site situation size skill skin
skirt slice slide smell smoke snack snake soap sock sofa software soil soldier solution
soup space speaker speed spirit spot spread square stage stair stamp stand standard
statement station status step stick stock stomach stone storm strategy stream strength
string structure struggle studio study style success sugar suggestion suit summit
sunflower supply surface surgery survey sweater symbol system tail talent tank tape
target task taste tax teen teenager telephone television temperature temple tension tent
term theater theatre theme theory therapy thought thread threat throat tie tiger title
toast toe tomato tone tongue tooth topic tour tournament tower toy track trade tradition
traffic trail training transport trash treasure treat treatment trend trial trick trophy
truck trust truth tune turn turtle twin type uniform union unit universe update user
value van variety vegetable veggie vehicle version victory village violin vision visit
visitor volume vote wage wall wallet warmth warning waste watch wave wealth weapon wear
web wheel while wind wing winner wisdom wish witness wolf wonder wood wool worker
workshop worry worth wound yard youth zone hug snap selfie meme vibe vibes thoughts tons
setbacks obstacles themes spill recharge haha
"""

EN_MORE_OTHER = """
goodnight goodmorning gn gm nite yes well yea yeh woohoo woo wooo yippee yum yummy
oof ouch mm mmm mhm gotcha lemme
gimme looky plus anytime bummer kinda sorta dunno indeed hahah ahaha ahah haha heh
wowza phew shh psst ahoy eek gee golly hah huzzah meow oh-oh oh-no uh-oh whew boo bah
alright aye nay congratz grats cheers hugs
"""

PT_MORE = """
sim claro beleza tudo fixe boa pronto obrigadinho obrigadíssimo lindo querida querido
viva força coragem saudade calma cuidado atenção socorro boa-sorte bom-dia
coisa sítio lugar caminho noite tarde semana vez vezes pouco bocado bastante imenso
adoro adorei amei curti gostei espero acho penso sei vi fiz fui tive estive
"""

ES_MORE = """
sí claro vale genial bueno perfecto estupendo guay chévere bacán padrísimo qué vaya
ánimo cuidado atención socorro suerte felicidades enhorabuena gracias hola adiós
cosa sitio lugar camino vez veces poco bastante encanta encantó creo pienso sé vi hice
fui tuve estuve espero ojalá mañana buenos buenas noches tardes días
"""
